package sandboxtest

import "testing"

// Class is what a hostile case attacks.
type Class string

// The classes of hostile cases.
const (
	// TakeDown: the host process, or its service to every tenant.
	TakeDown Class = "take-down"
	// Channel: a way for one execution or tenant to reach or leave something for another.
	Channel Class = "channel between executions or tenants"
	// Exhaustion: one execution or tenant starving the host or the others.
	Exhaustion Class = "exhaustion"
	// Escape: reaching beyond the sandbox (host files, the network, the host's processes).
	Escape Class = "escape"
	// ProtocolAbuse: breaking or forging the host⇄child protocol or the MCP face.
	ProtocolAbuse Class = "protocol abuse"
)

// Case is one hostile case the project tests.
type Case struct {
	Name  string
	Class Class
	// Where is the test that covers a case outside this suite, as "path/file_test.go:TestName"
	// from the module root; empty for a case Run runs against every backend.
	Where string
	run   func(c *contract, t *testing.T)
	// kernel marks the kernel attack surface cases, which RunKernelSurface runs alone.
	kernel bool
}

// Hostile is every hostile case the project tests, in one place, each with its class: the
// ones this suite runs against every backend (Where empty), and the ones that are not about a
// backend and live beside the code they attack (TestHostileCatalogue checks that each Where
// names a test that exists). A new hostile test is added here.
var Hostile = []Case{
	// Run against every backend.
	{Name: "cpu spin with signals ignored", Class: Exhaustion, run: (*contract).cpuSpin},
	{Name: "posing as the CPU limit (SIGKILL of itself just before it)", Class: ProtocolAbuse, run: (*contract).selfKill},
	{Name: "sleeper hits the wall clock", Class: Exhaustion, run: (*contract).sleeper},
	{Name: "2 GiB allocation", Class: Exhaustion, run: (*contract).memory},
	{Name: "100 MiB file", Class: Exhaustion, run: (*contract).fileSize},
	{Name: "fork bomb", Class: Exhaustion, run: (*contract).forkBomb},
	{Name: "fork bomb of new sessions", Class: Exhaustion, run: (*contract).sessionForkBomb},
	{Name: "thread bomb", Class: Exhaustion, run: (*contract).threadBomb},
	{Name: "setsid double-forked grandchild", Class: Escape, run: (*contract).grandchild},
	{Name: "1 GiB of stdout", Class: Exhaustion, run: (*contract).floodStdout},
	{Name: "garbage on the channel", Class: ProtocolAbuse, run: (*contract).garbage},
	{Name: "forged frame", Class: ProtocolAbuse, run: (*contract).forged},
	{Name: "100 MiB line on the channel", Class: ProtocolAbuse, run: (*contract).hugeLine},
	{Name: "closing the channel and continuing", Class: ProtocolAbuse, run: (*contract).closeChannel},
	{Name: "flooding calls without reading the results", Class: Exhaustion, run: (*contract).callFlood},
	{Name: "secrets and host files", Class: Escape, run: (*contract).secrets},
	{Name: "killing the parent", Class: TakeDown, run: (*contract).killParent},
	{Name: "posing as a setup failure", Class: ProtocolAbuse, run: (*contract).poseAsSetupFailure},
	{Name: "cancellation kills the tree", Class: Escape, run: (*contract).cancel},
	{Name: "SysV IPC across executions", Class: Channel, run: (*contract).sysvIPC},
	{Name: "keyring across executions", Class: Channel, run: (*contract).keyring},
	{Name: "POSIX shm, mqueue and shared tmp across executions", Class: Channel, run: (*contract).posixShared},
	{Name: "reaching a concurrent execution", Class: Channel, run: (*contract).concurrent},
	{Name: "a nested user namespace (alone, with mount or network namespaces) and mounts over /usr", Class: Escape, run: (*contract).nestedNamespaces, kernel: true},
	{Name: "netlink sockets to netfilter, xfrm and other kernel subsystems", Class: Escape, run: (*contract).netlink, kernel: true},
	{Name: "the keyring calls", Class: Channel, run: (*contract).keyctl, kernel: true},
	{Name: "a keyring across tenants", Class: Channel, run: (*contract).tenantKeyring, kernel: true},
	{Name: "user namespaces, netlink and keyrings through the i386 ABI", Class: Escape, run: (*contract).foreignABI, kernel: true},

	// Covered beside the code they attack.
	{Name: "socket through the 32-bit ABI past the inet filter", Class: Escape, Where: "engine/backend/process/foreignabi_test.go:TestForeignABICannotMakeASocket"},
	{Name: "kill(-1) of another execution sharing the uid", Class: Channel, Where: "engine/backend/process/scope_test.go:TestKillAllSparesOtherExecutions"},
	{Name: "killing the init that keeps the tree, to leave a survivor behind a clean result", Class: Escape, Where: "engine/backend/process/tree_test.go:TestKilledSubreaperIsNeverACleanResult"},
	{Name: "a warm child reused or leaving state", Class: Channel, Where: "engine/backend/process/warm_test.go:TestWarmChildrenShareNothing"},
	{Name: "host files and the data dir out of reach", Class: Escape, Where: "engine/backend/namespaces/isolated_test.go:TestHostFilesOutOfReach"},
	{Name: "host loopback unreachable", Class: Escape, Where: "engine/backend/namespaces/isolated_test.go:TestHostLoopbackUnreachable"},
	{Name: "uid 0 inside holds no capabilities", Class: Escape, Where: "engine/backend/namespaces/caps_test.go:TestUIDZeroHoldsNoCapabilities"},
	{Name: "malformed and forged wire frames", Class: ProtocolAbuse, Where: "engine/wire/wire_test.go:FuzzDecode"},
	{Name: "unbounded wire lines", Class: ProtocolAbuse, Where: "engine/wire/wire_test.go:TestReaderBounds"},
	{Name: "hostile regular expression in read_tool_output", Class: Exhaustion, Where: "outputs/window_test.go:TestSearchHostilePattern"},
	{Name: "a tenant reading another tenant's blobs", Class: Channel, Where: "outputs/blobtest/contract.go:contractTenants"},
	{Name: "an upstream's $ref cycle overflowing the stack", Class: TakeDown, Where: "upstream/hostile_test.go:TestSchemaRefCycleUnavailable"},
	{Name: "an upstream schema making validation explode", Class: TakeDown, Where: "upstream/hostile_test.go:TestSchemaValidationBounded"},
	{Name: "any upstream schema and arguments", Class: TakeDown, Where: "toolshape/validate_test.go:FuzzSchema"},
	{Name: "an upstream schema fetching remote references", Class: Escape, Where: "upstream/hostile_test.go:TestSchemaRemoteRefNeverFetched"},
	{Name: "a hostile upstream against the built binary", Class: TakeDown, Where: "conformance/hostile_test.go:TestHostileUpstream"},
	{Name: "upstream tool names and descriptions forging lines", Class: ProtocolAbuse, Where: "upstream/hostile_test.go:TestUpstreamToolNamesValidated"},
	{Name: "an upstream flooding the catalogue", Class: Exhaustion, Where: "upstream/hostile_test.go:TestCatalogueBounded"},
	{Name: "an upstream announcing list_changed on every call", Class: Exhaustion, Where: "upstream/hostile_test.go:TestRelistThrottled"},
	{Name: "an upstream answering without bound", Class: Exhaustion, Where: "upstream/http_test.go:TestHTTPResponseBounded"},
	{Name: "an upstream redirect collecting the credential", Class: Escape, Where: "upstream/http_test.go:TestHTTPBearerNotSentAcrossRedirect"},
	{Name: "idle and slow HTTP connections held open", Class: Exhaustion, Where: "cmd/mcp-sandbox/listen_test.go:TestServeHTTPConnectionsBounded"},
	{Name: "connections flooding the sandbox service", Class: Exhaustion, Where: "cmd/mcp-sandbox/listen_test.go:TestSandboxServiceConnectionsBounded"},
	{Name: "a killed server's leftovers swept, and only its own", Class: Exhaustion, Where: "cmd/mcp-sandbox/sweep_test.go:TestSweepAfterKill"},
	{Name: "state files readable by other local users", Class: Escape, Where: "cmd/mcp-sandbox/state_test.go:TestStateIsPrivate"},
	{Name: "a hostile sandbox service (endless lines, floods, forged and cut frames, lying describes, redirects, echoed credentials)", Class: ProtocolAbuse, Where: "remote/hostile_test.go:TestHostileStreams"},
	{Name: "any remote stream", Class: ProtocolAbuse, Where: "remote/stream_test.go:FuzzStream"},
	{Name: "a lying sandbox service behind the built binary (a level below the terms, a refusal after output, echoed credentials)", Class: ProtocolAbuse, Where: "cmd/mcp-sandbox/lyingservice_test.go:TestRunAgainstALyingService"},
	{Name: "a replica stalled past its lease handing over a result the ledger holds unknown", Class: Exhaustion, Where: "conformance/stalled_unix_test.go:TestReplicaStalledPastItsLease"},
	{Name: "egress paths that leave a URL rule's prefix at the origin (dot segments, encoded separators)", Class: Escape, Where: "egress/path_test.go:TestProxyPathsOutsideTheRuleNeverReachTheOrigin"},
	{Name: "a private port reached through an allowed name resolving to an IP rule's address", Class: Escape, Where: "egress/proxy_test.go:TestProxyIPRuleAdmitsItsPortOnly"},
	{Name: "a 62 MiB request header through the egress proxy", Class: Exhaustion, Where: "cmd/mcp-sandbox/egress_linux_test.go:TestRunNetworkRulesPathsAndHeads"},
	{Name: "TRACE echoing an egress credential", Class: Escape, Where: "egress/proxy_test.go:TestProxyRefusesEchoingMethodsToCredentialedHosts"},
	{Name: "an operator approving from a cut view of the arguments", Class: ProtocolAbuse, Where: "mcpserver/pause_test.go:TestApprovalsRoute"},
	{Name: "an export through a symbolic link, or into a shared file's mode", Class: Escape, Where: "cmd/mcp-sandbox/export_test.go:TestExportScrubsAgain"},
	{Name: "a token signed by another alg than its key names", Class: Escape, Where: "mcpserver/oauthrs/verify_test.go:TestKeyAlgEnforced"},
	{Name: "the kernel cases under a container's network-granting seccomp profile", Class: Escape, Where: "engine/backend/container/kernel_test.go:TestKernelSurfaceWithNetwork"},
	{Name: "two ~70 MB upstream answers at once", Class: Exhaustion, Where: "benchmarks/frames_test.go:TestReportLargeUpstreamAnswers"},
	{Name: "a remote credential over plaintext or in a URL", Class: Escape, Where: "remote/hostile_test.go:TestNewRefusesAnExposedCredential"},
	{Name: "unauthenticated or foreign callers of the sandbox service", Class: Escape, Where: "remote/service/service_test.go:TestServiceAuthenticates"},
	{Name: "a PostgreSQL DSN leaking through errors", Class: Escape, Where: "internal/pgdb/pgdb_test.go:TestOpenErrorsKeepTheDSNSecret"},
	{Name: "a killed replica's calls replayed or given a fresh allowance", Class: Exhaustion, Where: "budget/postgres/ledger_test.go:TestRecoverAfterKill"},
	{Name: "a config bomb (aliases, size)", Class: Exhaustion, Where: "configs/load_test.go:TestAliasesAreFollowedAndBounded"},
	{Name: "one tenant running more programs than its share, or the server's", Class: Exhaustion, Where: "cmd/mcp-sandbox/quotas_test.go:TestServeQuotaExecutions"},
	{Name: "one tenant opening sessions without bound", Class: Exhaustion, Where: "cmd/mcp-sandbox/quotas_test.go:TestServeQuotaSessions"},
	{Name: "one tenant filling the blob store", Class: Exhaustion, Where: "cmd/mcp-sandbox/quotas_test.go:TestServeQuotaStoredBytes"},
	{Name: "looping on the built-ins to bypass the call budget", Class: Exhaustion, Where: "binding/builtins_test.go:TestBuiltinsMetered"},
	{Name: "looping on a refused call to fill the run ledger", Class: Exhaustion, Where: "conformance/refusals_test.go:TestRefusalLoopKeepsTheLedgerSmall"},
	{Name: "an A2A agent card without bounds", Class: Exhaustion, Where: "upstream/a2a_test.go:TestA2ACardBounds"},
	{Name: "an A2A card pointing its endpoint elsewhere", Class: Escape, Where: "upstream/a2a_test.go:TestA2AEndpointOrigin"},
	{Name: "a server without CAP_KILL left waiting on a program it cannot kill", Class: TakeDown, Where: "cmd/mcp-sandbox/systemd_test.go:TestWithoutCapKillTeardownIsBounded"},
	{Name: "a sweep removing a live or foreign owner's containers", Class: TakeDown, Where: "engine/backend/container/container_test.go:TestSweepRemovesOnlyDeadOwners"},
}
