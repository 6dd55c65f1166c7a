// Package mcpsandbox_test holds the rules of the house that tests enforce rather than memory.
// Each test below says its rule; each was seen to fail when its rule was broken.
//
//   - TestImportRules: who may import whom (docs/design.md §2), for linux, darwin and windows:
//     what each package may import (allowed), who may import a room (importers, a room's door:
//     issue 40's rooms, the remote client and service, the HTTP guard), and what only tests
//     may import (testOnly: the test kits). The server's assembly is a room whose door only cmd
//     passes.
//   - TestAllowlistIsReal: every entry of that allowlist has a reason and names real packages.
//   - TestEveryPackageHasADoc, TestDocImportClaims: every package has a doc.go, and the
//     sentence in it that says what the package imports ("It imports …") matches go list.
//   - TestNoStdoutOutsideCmd: a stray byte on stdout corrupts the stdio MCP transport.
//   - TestNoRawSkip: a test skips only through internal/gate, which fails it in CI when a
//     capability is required (MCP_SANDBOX_REQUIRE) and says why either way.
//   - TestEveryBackendRunsTheContract: every package under engine/backend/ runs the sandboxtest
//     contract suite, except the ones notBackends names with a reason.
//   - TestEveryFuzzTargetIsInMakeFuzz: `make fuzz` runs every fuzz target of the repository.
//   - TestEnvAndFileReadsInCmd: the environment and files are read in cmd/ (which passes plain
//     values down), and elsewhere only where envReaders and fileReaders say why.
//   - TestEveryTestIsInALayer: each package's tests run in exactly one layer of the Makefile.
//   - TestOptionsByPointer: options are *XxxOptions, nil meaning defaults.
//   - TestFlocksInOwner: every flock is internal/owner's (docs/design.md §6.9).
//   - TestNoPlatformFilesInCmd: the command has no per-system file: every backend answers for
//     itself where it does not run, and one switch opens them all (docs/design.md §4.1).
//   - TestDesignReferences: every "§N" a comment, the README or the design itself cites, and
//     every link to an anchor of docs/design.md, names a section docs/design.md has; nothing
//     cites a design file outside the repository.
//   - TestDocLength: a package's doc.go is its job, imports and concurrency, at most
//     maxDocLines lines; the design goes to docs/design.md.
//   - TestMetaRulesCatchViolations: the import rules, the raw-skip check, the contract check,
//     the design references, the doc length, the flock check and the per-system check are fed violations and must find them (and
//     nothing in clean input).
//   - vocabulary_test.go: the engine depends on and names none of the host's concerns
//     (TestEngineKnowsNoHost), upstream depends on nothing under engine/
//     (TestUpstreamKnowsNoEngine), and each frame, a call's answer and a handle have one
//     definition: frames in engine/wire, the answer and handle in toolcall
//     (TestOneDefinitionOfEachFrame).
package mcpsandbox_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"
)

const module = "github.com/mcp-sandbox/mcp-sandbox"

// platforms are the GOOS values every rule is checked for: the product runs its local
// backends on linux, and builds (and serves through a remote backend) on the others.
var platforms = []string{"linux", "darwin", "windows"}

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	GoFiles    []string
	CgoFiles   []string
}

func (p pkg) rel() string { return strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/") }

var listed sync.Map // GOOS → []pkg

// listPackages is `go list -json ./...` for goos (cached).
func listPackages(t *testing.T, goos string) []pkg {
	t.Helper()
	if v, ok := listed.Load(goos); ok {
		return v.([]pkg)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list (GOOS=%s): %v", goos, err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	listed.Store(goos, pkgs)
	return pkgs
}

// exempt are the trees no rule binds: the command wires everything, and the black-box tests
// and benchmarks may use anything.
func exempt(rel string) bool {
	return rel == "" || strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "conformance") || strings.HasPrefix(rel, "benchmarks")
}

// rule is one entry of the import allowlist: a package (a trailing /* covers its subpackages),
// the imports it may have besides the standard library (module-relative, or module paths
// matched as prefixes), and why.
type rule struct {
	pkg     string
	imports []string
	why     string
}

var allowed = []rule{
	{"failure", nil, "the leaf of kinds and the Error type: every package may import it, and it imports nothing"},
	{"configs", []string{"failure", "egress", "internal/nearest", "go.yaml.in/yaml/v3"}, "the config's types, strict loading and validation: a YAML decoder, the network rule language it validates (egress, a leaf), the one \"did you mean\" (internal/nearest, a leaf), and nothing of the runtime"},
	{"outputs", []string{"failure"}, "previews, blobs and handles: a leaf both engine and binding import (failure allowed, as for every package)"},
	{"engine", []string{"failure", "outputs", "engine/wire", "engine/bootstrap", "toolcall", "egress"}, "the core imports leaves only, so no path leads from a program to a tool registry"},
	{"egress", []string{"failure"}, "the egress proxy and its rule language: a leaf on the standard library's net/http and crypto/x509, which the engine runs per execution and cmd checks upstream URLs with"},
	{"egress/egresstest", []string{"egress"}, "the egress tests' HTTPS origin on loopback, signed by an egress CA of its own; only tests import it (testOnly)"},
	{"engine/wire", []string{"toolcall"}, "the host⇄child protocol: frames and their bounded codec; a result frame carries a call's answer (toolcall's Answer, the one type of it)"},
	{"toolshape", []string{"github.com/google/jsonschema-go"},
		"a tool's shape: its schemas read once into one model, its signature, stub, redaction and approval view, and the validator (jsonschema-go) bounded against hostile schemas; a leaf, so its fuzz target's instrumented build is small"},
	{"toolshape/shapetest", []string{"internal/gate"}, "the hostile schemas and the Python check the tests of tool shapes share (its capabilities gated); only tests import it (testOnly)"},
	{"toolcall", []string{"failure"}, "the one type of a tool call's answer and of a handle (Answer, Handle): a leaf every package on a call's path imports, upstream and the engine alike, so neither imports the other's"},
	{"engine/bootstrap", nil, "bootstrap.py, embedded"},
	{"engine/backend/*", []string{"engine", "failure", "internal/*", "golang.org/x/sys", "engine/backend/spawned"},
		"one isolation mechanism each, behind engine.Backend, over the process plumbing of internal/ (spawned is the local backends' shared adapter); " +
			"never engine/wire: a backend starts a child and hands the engine its channel, and the engine speaks the frames"},
	{"remote", []string{"engine", "engine/wire", "outputs", "failure"},
		"the remote client, an engine.Sandbox elsewhere (not a backend: it starts no child): the engine's interfaces and its call limiter, the frames it carries (engine/wire), and outputs, whose Capture keeps a stream's bytes as they arrive"},
	{"remote/service", []string{"engine", "engine/wire", "toolcall", "remote", "failure"},
		"the sandbox service, the server half of the remote protocol (whose routes and frames, and the client, are package remote's), over a local engine.Runner"},
	{"engine/backend/seatbelt", []string{"engine", "failure", "internal/*", "golang.org/x/sys"},
		"the macOS backend: the init helper (internal/launch), interpreter discovery and the child's environment (internal/python, internal/spawn); " +
			"never engine/backend/spawned, whose identities, leases and cgroups are Linux's, so its profile and arguments stay pure functions tested anywhere"},
	{"engine/sandboxtest", []string{"engine", "outputs", "failure", "internal/gate", "internal/launch"}, "the backend contract suite: the engine's interfaces and the outputs' attachments it checks, the test gate, and the init helper's hook its Main runs first"},
	{"internal/tokenconn", nil, "the channel a child connects back to, taken by its token: the standard library only, so it builds for every GOOS (the container backend on linux, jobobject on windows)"},
	{"internal/launch", []string{"golang.org/x/sys"},
		"the init helper, whose start every child pays: the standard library and x/sys only, so few package initialisers run before its own (docs/design.md §19.1); " +
			"it installs the seccomp filter the host assembled (internal/launch/seccomp, never imported here) and Landlock by its own system calls, never go-seccomp-bpf or go-landlock"},
	{"internal/launch/seccomp", []string{"golang.org/x/sys", "github.com/elastic/go-seccomp-bpf"},
		"the seccomp policy assembled in the host by the library docs/design.md §4 names, for the init helper (as bytes) and the container runtimes (as a profile)"},
	{"internal/*", []string{"internal/*", "golang.org/x/sys"}, "process plumbing and test gates; the init helper the backends exec and the images built from this host's files (internal/inithelper, internal/hostimage), which the command hands the backends"},
	{"assembly", []string{"configs", "engine", "engine/backend/*", "remote", "remote/service", "upstream", "upstream/oauthclient", "mcpserver", "mcpserver/oauthrs",
		"execution", "approval", "cassette", "budget", "budget/sqlite", "budget/postgres", "outputs", "outputs/pgblob", "egress", "metrics", "failure",
		"internal/httpguard", "internal/inithelper", "internal/owner", "internal/pgdb", "internal/userns"},
		"the running server assembled from a config the command read and validated (as caddy's package builds what its cmd started): the backends, the remote client and the sandbox service, the upstream pools, the MCP face, the stores, metrics; " +
			"it reads no flag, and the environment and files only through the Env the command hands it (TestEnvAndFileReadsInCmd)"},
	{"tools/*", nil, "the build's own programs (make dist's release archives, make npm's and make wheel's packages): the standard library only; nothing imports them, and the binary users run holds none of them"},
	{"budget", []string{"failure", "telemetry"}, "the meters and the run ledger's interface: no database driver, so what meters calls (binding) links none; the context economy it keeps per execution is telemetry's Context, the one type of it"},
	{"budget/sqlite", []string{"budget", "budget/internal/lazy", "failure", "telemetry", "internal/owner", "modernc.org/sqlite"},
		"the run ledger on SQLite in pure Go, its openers' liveness held by internal/owner's lock"},
	{"budget/postgres", []string{"budget", "budget/internal/lazy", "failure", "telemetry", "internal/pgdb", "github.com/jackc/pgx"},
		"the run ledger on PostgreSQL (pgx, through what internal/pgdb shares)"},
	{"budget/internal/lazy", nil, "the waiting both ledgers share for records that may lag"},
	{"budget/ledgertest", []string{"budget", "failure", "telemetry", "internal/gate", "github.com/google/go-cmp"}, "the contract every run ledger passes (its waits stretched by internal/gate's load scale)"},
	{"internal/pgdb", []string{"github.com/jackc/pgx"},
		"what the PostgreSQL stores share: a pool opened without leaking the DSN, migrations under an advisory lock"},
	{"internal/pgdb/pgtest", []string{"internal/gate", "github.com/jackc/pgx"}, "the tests' helper that gives each test a schema of its own"},
	{"internal/testkit", []string{"github.com/modelcontextprotocol/go-sdk"},
		"the tests' kit: the built binary and mock upstream, a tool result's text (go-sdk types), a log sink; only tests import it (testOnly)"},
	{"outputs/pgblob", []string{"outputs", "failure", "internal/pgdb", "github.com/jackc/pgx"},
		"the blob store on PostgreSQL, an adapter beside outputs so the engine (which imports outputs) never links a database driver"},
	{"outputs/blobtest", []string{"outputs", "github.com/google/go-cmp"}, "the contract every blob store passes"},
	{"upstream", []string{"failure", "telemetry", "toolcall", "toolshape", "internal/nearest", "github.com/modelcontextprotocol/go-sdk", "github.com/a2aproject/a2a-go/a2a",
		"github.com/a2aproject/a2a-go/v2/a2a", "github.com/a2aproject/a2a-go/v2/a2apb", "google.golang.org/protobuf/encoding/protojson", "github.com/segmentio/encoding/json"},
		"the MCP and A2A client side: the go-sdk, each tool's shape read once (toolshape), and A2A's protocol types from a2a-go: v0.3's for 0.3, v2's for 1.0 (its model, and its protobuf messages that protojson reads 1.0's answers into by the protobuf JSON rules 1.0's binding is defined by), never a client package (neither bounds its reads, and v0.3's links a server); the go-sdk's own JSON decoder, called directly to decode a stdio frame as the go-sdk does without its per-frame buffer (frame.go); an upstream call's span (telemetry); a call's answer is toolcall's Answer, the leaf it shares with the engine; an unknown argument's \"did you mean\" (internal/nearest); never budget, outputs, binding or engine (nothing under engine/)"},
	{"approval", []string{"budget", "failure", "telemetry"},
		"the one home of a call that needs a person's approval: the question, its pause (a row of budget's store, its one state) and its answer from any path, recorded (budget) and counted (telemetry); " +
			"never upstream (binding builds the question from the tool), binding, cassette or mcpserver (how a question crosses MCP is an Asker it is handed)"},
	{"binding", []string{"upstream", "budget", "outputs", "toolcall", "toolshape", "failure", "telemetry", "approval"}, "one binding call's home: policy and the call (upstream), meters and records (budget), paging (outputs), the answer it hands the engine (toolcall), which names are Python names (toolshape), its span and metrics (telemetry), the question a call that needs approval asks (approval); never engine"},
	{"execution", []string{"engine", "binding", "approval", "upstream", "budget", "outputs", "failure", "telemetry"},
		"one program's execution for an agent, shared by run_code and `mcp-sandbox run`: the engine wired to a binding.Execution, recorded, its outputs kept, reported (telemetry); never the go-sdk"},
	{"cassette", []string{"binding", "upstream", "outputs", "toolcall", "toolshape", "failure", "budget", "execution"},
		"an execution's calls recorded and played back: the binding.Tape it implements, the redaction of arguments (upstream's tools, toolshape's mark), answers (toolcall), the kept results a replay's handle reads are served from (outputs); " +
			"the keeper of each execution's cassette in the ledger (budget's Cassettes, execution's CassetteKeeper); never mcpserver, which imports it"},
	{"mcpserver", []string{"engine", "execution", "binding", "approval", "upstream", "budget", "outputs", "failure", "telemetry", "cassette", "programs", "github.com/modelcontextprotocol/go-sdk"},
		"the MCP face: it hands each run_code to execution.Execute and renders results, and reports spans and direct calls (telemetry); how a question crosses MCP is its Asker of package approval's questions; a paused program's journal is a cassette's; saved programs are package programs', offered here as tools"},
	{"programs", []string{"budget", "toolshape"},
		"saved programs' one home: kept in the ledger (budget's Programs), their input schema read from main's signature in a tool shape's terms (toolshape); never upstream, execution or mcpserver, which offers them"},
	{"mcpserver/oauthrs", []string{"github.com/go-jose/go-jose/v4", "github.com/modelcontextprotocol/go-sdk"},
		"the OAuth resource server: access tokens verified as JWTs by go-jose (never by code of ours) against keys found by go-sdk's oauthex discovery; never configs (cmd converts)"},
	{"upstream/oauthclient", []string{"upstream", "github.com/modelcontextprotocol/go-sdk", "golang.org/x/oauth2"},
		"an upstream's OAuth access tokens by the client-credentials grant: the exchange by x/oauth2 (never by code of ours), discovery by the go-sdk's auth and oauthex, errors as upstream's CredentialError; never configs (cmd converts)"},
	{"telemetry", []string{"go.opentelemetry.io/otel"},
		"the seam to what an operator watches: the OpenTelemetry API (never its SDK: cmd installs that), a metrics interface, a logger in a context; engine stays free of it"},
	{"metrics", []string{"telemetry", "github.com/prometheus/client_golang"},
		"telemetry.Metrics over Prometheus, imported by the command and the server it assembles (assembly) only, so no other package links Prometheus"},
}

func ruleFor(rel string) (rule, bool) {
	for _, r := range allowed {
		if r.pkg == rel {
			return r, true
		}
	}
	for _, r := range allowed {
		if strings.HasSuffix(r.pkg, "/*") && strings.HasPrefix(rel, strings.TrimSuffix(r.pkg, "*")) {
			return r, true
		}
	}
	return rule{}, false
}

func isStd(imp string) bool { return !strings.Contains(strings.Split(imp, "/")[0], ".") }

// matches reports whether import path imp is named by entry: module-relative (a trailing /*
// or /… covers the subpackages), or a module path (a prefix).
func matches(imp, entry string) bool {
	sub := strings.HasSuffix(entry, "/*") || strings.HasSuffix(entry, "/…")
	entry = strings.TrimSuffix(strings.TrimSuffix(entry, "/…"), "/*")
	full := entry
	if isStd(entry) {
		full = module + "/" + entry
	}
	if sub {
		return strings.HasPrefix(imp, full+"/")
	}
	return imp == full || !strings.HasPrefix(full, module) && strings.HasPrefix(imp, full+"/")
}

func TestImportRules(t *testing.T) {
	for _, goos := range platforms {
		for _, p := range listPackages(t, goos) {
			for _, v := range testOnlyViolations(p.rel(), p.Imports) {
				t.Errorf("GOOS=%s: %s", goos, v)
			}
			if exempt(p.rel()) {
				continue
			}
			for _, v := range importerViolations(p.rel(), p.Imports) {
				t.Errorf("GOOS=%s: %s", goos, v)
			}
			for _, v := range importViolations(p.rel(), p.Imports) {
				t.Errorf("GOOS=%s: %s", goos, v)
			}
		}
	}
}

// testOnly are the packages only tests may import (a _test.go file, whose imports go list
// does not count among a package's), with why.
var testOnly = map[string]string{
	"internal/testkit":    "it builds binaries and writes files for a test; nothing the product runs may depend on it",
	"egress/egresstest":   "it starts a test server and writes files into a test's directory; nothing the product runs may depend on it",
	"internal/claudecode": "it runs Claude Code against a scripted model in a network namespace for a test; nothing the product runs may depend on it",
	"toolshape/shapetest": "it holds hostile schemas and runs python3 and mypy for a test; nothing the product runs may depend on it",
}

// importers are the packages a room of issue 40 may be imported by (module-relative; a
// trailing /* covers the subpackages), with why: a room's door. The new rooms say who uses
// them, as the allowlist says what each uses.
var importers = map[string]struct {
	by  []string
	why string
}{
	"toolcall": {[]string{"engine", "engine/*", "remote", "remote/*", "upstream", "binding", "cassette"},
		"a call's answer and handle cross the call's path, from upstream through binding (and a cassette) to the engine and its protocol (and the remote client and service, which carry it), and nowhere else"},
	"toolshape": {[]string{"upstream", "upstream/*", "binding", "cassette", "programs"},
		"a tool's shape is the upstream client's, read by what walks and records its calls, and a saved program's, read from its main; the engine never learns a tool's schema, and the MCP face reads it through upstream or programs"},
	"remote": {[]string{"cmd/*", "assembly", "remote/service"},
		"the remote client is one of the sandboxes a profile opens into (assembly), as a backend is; the service shares its protocol"},
	"remote/service": {[]string{"cmd/*", "assembly"}, "the sandbox service is what `mcp-sandbox sandbox-service` serves"},
	"internal/httpguard": {[]string{"cmd/*", "assembly"},
		"the bounds of the command's HTTP listeners (set by its flags, applied where the server is assembled); a handler below decides who is authenticated and never guards a listener itself"},
	"approval": {[]string{"binding", "execution", "mcpserver", "assembly", "cmd/mcp-sandbox"},
		"a question is asked by a binding call's approval step, counted in an execution's result, crosses MCP in mcpserver, and its webhook is wired by the server's assembly; no other room reaches it (the engine asks through ToolCaller, upstream knows no approvals)"},
	"assembly": {[]string{"cmd/*"},
		"the running server is assembled for the command's subcommands only; a package below it never builds the server it is part of"},
}

// importerViolations says which imports of package rel a leaf's importers rule forbids.
func importerViolations(rel string, imports []string) []string {
	var out []string
	for _, imp := range imports {
		leaf, ok := strings.CutPrefix(imp, module+"/")
		r, ruled := importers[leaf]
		if !ok || !ruled || slices.ContainsFunc(r.by, func(e string) bool { return rel == e || matches(module+"/"+rel, e) }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s imports %s, which only %s may import: %s", rel, leaf, strings.Join(r.by, ", "), r.why))
	}
	return out
}

// testOnlyViolations says which of a package's non-test imports only tests may make.
func testOnlyViolations(rel string, imports []string) []string {
	var out []string
	for _, imp := range imports {
		if why, ok := testOnly[strings.TrimPrefix(imp, module+"/")]; ok && strings.HasPrefix(imp, module+"/") {
			out = append(out, fmt.Sprintf("%s imports %s outside its tests: %s", rel, imp, why))
		}
	}
	return out
}

// importViolations says what breaks docs/design.md §2 in a package rel importing imports.
func importViolations(rel string, imports []string) []string {
	r, ok := ruleFor(rel)
	if !ok {
		return []string{fmt.Sprintf("package %s has no import rule: add it to docs/design.md §2 and to allowed, with its reason", rel)}
	}
	var out []string
	for _, imp := range imports {
		if !isStd(imp) && !slices.ContainsFunc(r.imports, func(e string) bool { return matches(imp, e) }) {
			out = append(out, fmt.Sprintf("%s imports %s, which docs/design.md §2 does not allow", rel, imp))
		}
	}
	return out
}

func TestAllowlistIsReal(t *testing.T) {
	var pkgs []string
	for _, p := range listPackages(t, "linux") {
		pkgs = append(pkgs, p.ImportPath)
	}
	out, err := exec.Command("go", "list", "-m", "all").Output()
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			mods = append(mods, f[0])
		}
	}
	real := func(entry string) bool {
		if isStd(entry) {
			return slices.ContainsFunc(pkgs, func(p string) bool { return matches(p, entry) })
		}
		return slices.ContainsFunc(mods, func(m string) bool {
			return m == entry || strings.HasPrefix(entry, m+"/") || strings.HasPrefix(m, entry+"/")
		})
	}
	seen := map[string]bool{}
	for _, r := range allowed {
		if strings.TrimSpace(r.why) == "" {
			t.Errorf("allowlist entry %s has no reason", r.pkg)
		}
		if seen[r.pkg] {
			t.Errorf("allowlist entry %s appears twice", r.pkg)
		}
		seen[r.pkg] = true
		if !real(r.pkg) {
			t.Errorf("allowlist entry %s names no package of the module", r.pkg)
		}
		for _, imp := range r.imports {
			if !real(imp) {
				t.Errorf("allowlist entry %s allows %s, which is no package of the module and no module it requires", r.pkg, imp)
			}
		}
	}
}

func TestEveryPackageHasADoc(t *testing.T) {
	for _, p := range listPackages(t, "linux") {
		if len(p.GoFiles) == 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(p.Dir, "doc.go")); err != nil {
			t.Errorf("package %s has no doc.go", p.ImportPath)
		}
	}
}

// claimNames are the words docs use for modules outside this one.
var claimNames = map[string]string{
	"go-sdk":             "github.com/modelcontextprotocol/go-sdk",
	"jsonschema-go":      "github.com/google/jsonschema-go",
	"x/sys":              "golang.org/x/sys",
	"go-landlock":        "github.com/landlock-lsm/go-landlock",
	"go-seccomp-bpf":     "github.com/elastic/go-seccomp-bpf",
	"pgx":                "github.com/jackc/pgx",
	"go-jose":            "github.com/go-jose/go-jose/v4",
	"x/oauth2":           "golang.org/x/oauth2",
	"go-cmp":             "github.com/google/go-cmp",
	"a2a-go":             "github.com/a2aproject/a2a-go/a2a", // its protocol types, never its client
	"a2a-go/v2":          "github.com/a2aproject/a2a-go/v2",  // A2A 1.0: its model and protobuf messages
	"protojson":          "google.golang.org/protobuf/encoding/protojson",
	"OpenTelemetry API":  "go.opentelemetry.io/otel",
	"segmentio/encoding": "github.com/segmentio/encoding/json", // the go-sdk's JSON decoder
}

var (
	claimRE  = regexp.MustCompile(`\b(?:It imports|Imports:)\s+(.*?)(?:[.;:]\s|[.;:]$)`)
	parensRE = regexp.MustCompile(`\([^)]*\)`)
	listRE   = regexp.MustCompile(`,|\band\b|\bonly\b|\bplus\b`)
)

// TestDocImportClaims: the sentence "It imports A, B and C (…), never D." of each doc.go names
// every package of the module and every module it imports (on any platform), and no package of
// the module it does not import. Parentheses are commentary; what follows "never" is not
// checked against imports.
func TestDocImportClaims(t *testing.T) {
	imports := map[string]map[string]bool{} // rel → imports on any platform
	dirs := map[string]string{}
	for _, goos := range platforms {
		for _, p := range listPackages(t, goos) {
			if exempt(p.rel()) || len(p.GoFiles) == 0 {
				continue
			}
			dirs[p.rel()] = p.Dir
			if imports[p.rel()] == nil {
				imports[p.rel()] = map[string]bool{}
			}
			for _, imp := range p.Imports {
				if !isStd(imp) {
					imports[p.rel()][imp] = true
				}
			}
		}
	}
	for rel, dir := range dirs {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil || f.Doc == nil {
			continue // TestEveryPackageHasADoc reports it
		}
		doc := strings.Join(strings.Fields(f.Doc.Text()), " ")
		m := claimRE.FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("%s: doc.go says nothing of the form \"It imports …\" about its imports", rel)
			continue
		}
		claim := parensRE.ReplaceAllString(m[1], "")
		if i := strings.Index(claim, "never"); i >= 0 {
			claim = claim[:i]
		}
		var named []string
		for _, w := range listRE.Split(claim, -1) {
			w = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(w), "the "), " package")
			switch {
			case w == "" || strings.Contains(w, "standard library") || strings.HasPrefix(w, "nothing") || strings.HasPrefix(w, "is "):
			case claimNames[w] != "":
				named = append(named, claimNames[w])
			default:
				named = append(named, w)
			}
		}
		for imp := range imports[rel] {
			if !slices.ContainsFunc(named, func(e string) bool { return matches(imp, e) }) {
				t.Errorf("%s imports %s, but its doc.go says it imports %q", rel, imp, strings.TrimSpace(m[1]))
			}
		}
		for _, e := range named {
			if !isStd(e) {
				continue // a module outside this one may be named before it is used
			}
			used := false
			for imp := range imports[rel] {
				used = used || matches(imp, e)
			}
			if !used {
				t.Errorf("%s's doc.go says it imports %s, which it does not", rel, e)
			}
		}
	}
}

// TestNoStdoutOutsideCmd: a stray byte on stdout corrupts the stdio MCP transport.
func TestNoStdoutOutsideCmd(t *testing.T) {
	out, _ := exec.Command("git", "grep", "-nE", `\bfmt\.Print(ln|f)?\(|os\.Stdout`, "--", "*.go",
		":!cmd/**", ":!**/*_test.go", ":!conformance/**", ":!benchmarks/**").Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("writes to stdout outside cmd/:\n%s", s)
	}
}

// goFiles parses every tracked .go file that keep passes.
func goFiles(t *testing.T, keep func(name string) bool) map[string]*ast.File {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "*.go").Output()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, name := range strings.Fields(string(out)) {
		if !keep(name) {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files[name] = f
	}
	return files
}

// calls returns the calls in f of pkgName.X for X among names, as "pkgName.X".
func calls(f *ast.File, pkgName string, names ...string) []string {
	var got []string
	ast.Inspect(f, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkgName && slices.Contains(names, sel.Sel.Name) {
				got = append(got, pkgName+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return got
}

// TestNoRawSkip: Skip, Skipf and SkipNow are called only by internal/gate (Require for a
// missing capability, AppliesOnly for a test that does not apply here).
func TestNoRawSkip(t *testing.T) {
	files := goFiles(t, func(name string) bool { return !strings.HasPrefix(name, "internal/gate/") })
	for name, f := range files {
		for _, call := range rawSkips(f) {
			t.Errorf("%s calls %s: skip through internal/gate (Require or AppliesOnly), which says why and fails in CI when required", name, call)
		}
	}
}

// rawSkips returns the Skip, Skipf and SkipNow calls in f.
func rawSkips(f *ast.File) []string {
	var got []string
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && slices.Contains([]string{"Skip", "Skipf", "SkipNow"}, sel.Sel.Name) {
				got = append(got, sel.Sel.Name)
			}
		}
		return true
	})
	return got
}

// TestMetaRulesCatchViolations: the checkers above find a violation when one is there, so a
// rule cannot pass by checking nothing.
func TestMetaRulesCatchViolations(t *testing.T) {
	for _, tc := range []struct {
		rel     string
		imports []string
		want    int
	}{
		{"engine", []string{module + "/outputs", module + "/engine/wire", "context"}, 0},
		{"engine", []string{module + "/budget"}, 1},                                           // the core reaching a tool registry's meters
		{"upstream", []string{module + "/outputs", "github.com/a2aproject/a2a-go/a2asrv"}, 2}, // a2a-go's types only
		{"engine/backend/process", []string{module + "/engine", module + "/internal/launch"}, 0},
		{"cassette", []string{module + "/execution", module + "/budget", module + "/binding"}, 0},
		{"cassette", []string{module + "/mcpserver"}, 1}, // the MCP face imports it
		{"engine/backend/process", []string{module + "/mcpserver"}, 1},
		{"engine/backend/container", []string{module + "/engine/wire"}, 1}, // the engine speaks the frames
		{"remote", []string{module + "/engine", module + "/engine/wire", module + "/outputs"}, 0},
		{"remote", []string{module + "/budget", module + "/internal/spawn"}, 2}, // an engine elsewhere knows no host, and starts no child
		{"engine/backend/seatbelt", []string{module + "/engine", module + "/internal/launch", "golang.org/x/sys/unix"}, 0},
		{"engine/backend/seatbelt", []string{module + "/engine/backend/spawned"}, 1}, // Linux's shared plumbing
		{"internal/launch", []string{"encoding/json", "golang.org/x/sys/unix"}, 0},
		{"internal/launch", []string{"github.com/elastic/go-seccomp-bpf", "github.com/landlock-lsm/go-landlock/landlock"}, 2}, // the helper's start
		{"internal/launch", []string{module + "/internal/launch/seccomp", module + "/internal/gate"}, 2},
		{"internal/spawn", []string{module + "/internal/launch/seccomp", "golang.org/x/sys/unix"}, 0},
		{"internal/tokenconn", []string{"net", "crypto/subtle"}, 0},
		{"internal/tokenconn", []string{"golang.org/x/sys/unix", module + "/internal/gate"}, 2}, // it builds for every GOOS on the standard library
		{"no/such/package", nil, 1}, // a package without a rule
		{"upstream", []string{module + "/toolcall", module + "/toolshape", "github.com/a2aproject/a2a-go/v2/a2a"}, 0},
		{"upstream", []string{module + "/engine/wire", "github.com/google/jsonschema-go/jsonschema"}, 2}, // the answer's old home; the validator is toolshape's
		{"toolshape", []string{"github.com/google/jsonschema-go/jsonschema", "encoding/json"}, 0},
		{"toolshape", []string{module + "/upstream", "github.com/modelcontextprotocol/go-sdk/mcp"}, 2}, // a leaf below upstream
		{"toolcall", []string{module + "/engine/wire"}, 1},                                             // a leaf of failure alone
		{"approval", []string{module + "/budget", module + "/telemetry", "net/http"}, 0},
		{"approval", []string{module + "/upstream", module + "/cassette"}, 2}, // binding builds the question; the journal is an interface
	} {
		if got := importViolations(tc.rel, tc.imports); len(got) != tc.want {
			t.Errorf("importViolations(%s, %v) = %q, want %d", tc.rel, tc.imports, got, tc.want)
		}
	}
	for _, tc := range []struct {
		rel     string
		imports []string
		want    int
	}{
		{"upstream", []string{module + "/toolcall", module + "/toolshape"}, 0},
		{"upstream/oauthclient", []string{module + "/toolshape"}, 0},
		{"remote", []string{module + "/toolcall"}, 0},
		{"engine", []string{module + "/toolshape"}, 1},                          // the engine never learns a tool's schema
		{"mcpserver", []string{module + "/toolcall", module + "/toolshape"}, 2}, // the MCP face reads both through others
		{"execution", []string{module + "/failure", "encoding/json"}, 0},
		{"binding", []string{module + "/approval", module + "/upstream"}, 0},
		{"upstream", []string{module + "/approval", module + "/failure"}, 1}, // upstream knows no approvals
		{"mcpserver", []string{module + "/assembly"}, 1},                     // the face never builds the server
		{"cmd/mcp-sandbox", []string{module + "/assembly"}, 0},
		{"assembly", []string{module + "/remote", module + "/remote/service", module + "/internal/httpguard", module + "/approval"}, 0},
	} {
		if got := importerViolations(tc.rel, tc.imports); len(got) != tc.want {
			t.Errorf("importerViolations(%s, %v) = %q, want %d", tc.rel, tc.imports, got, tc.want)
		}
	}
	if got := testOnlyViolations("cmd/mcp-sandbox", []string{module + "/internal/testkit", module + "/internal/gate"}); len(got) != 1 {
		t.Errorf("testOnlyViolations found %q in a command importing the test kit, want 1", got)
	}
	if got := testOnlyViolations("engine", []string{module + "/engine/wire", "testing"}); len(got) != 0 {
		t.Errorf("testOnlyViolations found %q in clean imports", got)
	}
	if got := importerViolations("mcpserver", []string{module + "/remote", module + "/engine"}); len(got) != 1 {
		t.Errorf("importerViolations found %q in the MCP face importing the remote client, want 1", got)
	}
	if got := importerViolations("remote/service", []string{module + "/remote", module + "/internal/httpguard"}); len(got) != 1 {
		t.Errorf("importerViolations found %q in the sandbox service guarding its own listener, want 1", got)
	}
	if got := importerViolations("cmd/mcp-sandbox", []string{module + "/remote", module + "/remote/service"}); len(got) != 0 {
		t.Errorf("importerViolations found %q in the command", got)
	}
	parse := func(src string) *ast.File {
		f, err := parser.ParseFile(token.NewFileSet(), "x_test.go", "package x\n"+src, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if got := rawSkips(parse(`func TestA(t *testing.T) { if true { t.Skipf("no %s", "x") }; t.SkipNow() }`)); len(got) != 2 {
		t.Errorf("rawSkips found %v, want Skipf and SkipNow", got)
	}
	if got := rawSkips(parse(`func TestA(t *testing.T) { gate.Require(t, "x", false, "why") }`)); len(got) != 0 {
		t.Errorf("rawSkips found %v in a gated test", got)
	}
	if calls(parse(`func TestContract(t *testing.T) { sandboxtest.Run(t, nil) }`), "sandboxtest", "Run") == nil ||
		calls(parse(`func TestContract(t *testing.T) { other.Run(t, nil) }`), "sandboxtest", "Run") != nil {
		t.Error("calls does not tell a backend that runs the contract suite from one that does not")
	}
	design := designIndex("# d\n\n## 1. One\n\n### 1.2 Two and a half\n\n## 3. Three\n")
	for _, tc := range []struct {
		text string
		want int
	}{
		{"// as docs/design.md §1.2 says, and §3; issue 10 §7 is the issue's", 0},
		{"see [it](docs/design.md#12-two-and-a-half) and (#3-three)", 0},
		{"// the shape of docs/design.md §3.4", 1},                  // a section it does not have
		{"// who may import whom (" + "DESIGN" + ".md §1)", 1},      // a design file outside the repository
		{"see [it](docs/design.md#2-two) and §2", 2},                // an anchor and a section it lacks
		{"the [layout](#1-one), in " + "design.md#13-one-three", 1}, // an anchor it lacks
	} {
		if got := designRefViolations("x.go", tc.text, design); len(got) != tc.want {
			t.Errorf("designRefViolations(%q) = %q, want %d", tc.text, got, tc.want)
		}
	}
	long := "// Package x is long.\n" + strings.Repeat("//\n", maxDocLines) + "package x\n"
	if docLengthViolation("x/doc.go", long) == "" || docLengthViolation("x/doc.go", "// Package x is short.\npackage x\n") != "" {
		t.Error("docLengthViolation does not tell a doc.go over the limit from one within it")
	}
	if got := flocks(parse(`func f(fd int) { unix.Flock(fd, unix.LOCK_SH); syscall.Flock(fd, 2); _ = unix.FcntlFlock(0, 0, nil) }`)); len(got) != 3 {
		t.Errorf("flocks found %v, want unix.Flock, syscall.Flock and unix.FcntlFlock", got)
	}
	if got := flocks(parse(`func f(p string) { owner.Share(p); unix.Fsync(3) }`)); len(got) != 0 {
		t.Errorf("flocks found %v in code that takes its locks through internal/owner", got)
	}
	for _, tc := range []struct {
		name, src string
		bad       bool
	}{
		{"cmd/mcp-sandbox/local_linux.go", "package main\n", true},                              // a system by its name
		{"cmd/mcp-sandbox/advice.go", "//go:build !darwin && !windows\n\npackage main\n", true}, // by its constraint
		{"cmd/mcp-sandbox/seatbelt_other.go", "//go:build unix\n\npackage main\n", true},
		{"cmd/mcp-sandbox/linkmode_cgo.go", "//go:build cgo\n\npackage main\n", false}, // a build mode, not a system
		{"cmd/mcp-sandbox/backends.go", "package main\n\n// on linux, darwin and windows alike\n", false},
	} {
		if got := platformViolation(tc.name, tc.src); (got != "") != tc.bad {
			t.Errorf("platformViolation(%s) = %q, want a violation: %v", tc.name, got, tc.bad)
		}
	}
}

// designIndex returns the section numbers and the heading anchors of a design document.
func designIndex(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllStringSubmatch(md, -1) {
		if n := regexp.MustCompile(`^(\d+(?:\.\d+)*)\.? `).FindStringSubmatch(m[1]); n != nil {
			out["§"+n[1]] = true
		}
		out["#"+anchor(m[1])] = true
	}
	return out
}

// anchor is the id GitHub gives a heading: lower case, spaces as hyphens, and nothing but
// letters, digits, hyphens and underscores.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	sectionRefRE = regexp.MustCompile(`(issue \d+ )?§ ?(\d+(?:\.\d+)*)`)
	anchorRefRE  = regexp.MustCompile(`(design\.md|\]\()#([\w-]+)`)
)

// designRefViolations says which section references and design anchors in text (of file name)
// the design, indexed by designIndex, does not have. "issue N §M" is the section, not
// the design's.
func designRefViolations(name, text string, design map[string]bool) []string {
	var out []string
	for _, m := range sectionRefRE.FindAllStringSubmatch(text, -1) {
		if m[1] == "" && !design["§"+m[2]] {
			out = append(out, fmt.Sprintf("%s cites §%s, which docs/design.md does not have", name, m[2]))
		}
	}
	for _, m := range anchorRefRE.FindAllStringSubmatch(text, -1) {
		if !design["#"+m[2]] {
			out = append(out, fmt.Sprintf("%s links to #%s, which is no heading of docs/design.md", name, m[2]))
		}
	}
	if strings.Contains(text, "DESIGN"+".md") {
		out = append(out, fmt.Sprintf("%s cites a design file outside the repository: cite docs/design.md", name))
	}
	return out
}

// TestDesignReferences: what the code, the README and the design itself cite of the design
// is in docs/design.md.
func TestDesignReferences(t *testing.T) {
	md, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	design := designIndex(string(md))
	out, err := exec.Command("git", "ls-files", "*.go", "README.md", "*.yaml").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(strings.Fields(string(out)), "docs/design.md") {
		if name == "meta_test.go" {
			continue // its violations are fed to the checker on purpose
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if name == "docs/design.md" {
			text = strings.ReplaceAll(text, "](#", "](design.md#") // its own links, checked as links to it
		} else if name != "README.md" && !strings.HasSuffix(name, ".go") {
			text = strings.Join(regexp.MustCompile(`(?m)#.*$`).FindAllString(text, -1), "\n") // a YAML file's comments
		}
		for _, v := range designRefViolations(name, text, design) {
			t.Error(v)
		}
	}
}

// maxDocLines is how long a doc.go may be: about a screen.
const maxDocLines = 60

// docLengthViolation says why the doc.go at name, holding src, is too long, or "".
func docLengthViolation(name, src string) string {
	if n := strings.Count(strings.TrimRight(src, "\n"), "\n") + 1; n > maxDocLines {
		return fmt.Sprintf("%s has %d lines, over %d: keep the package's job, imports and concurrency, and move the rest to docs/design.md", name, n, maxDocLines)
	}
	return ""
}

// TestDocLength: no doc.go is over maxDocLines lines.
func TestDocLength(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "doc.go", "*/doc.go").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Fields(string(out)) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if v := docLengthViolation(name, string(b)); v != "" {
			t.Error(v)
		}
	}
}

// notBackends are the packages under engine/backend/ that are not backends, with why; every
// other one must run the contract suite, so a new backend cannot forget it.
var notBackends = map[string]string{
	"spawned":   "what the local backends share (identities, interpreter, the adapter to engine.Child); each of them runs the suite",
	"jobobject": "the Windows backend: the contract suite's programs are Unix's (fork, signals, /proc) and do not run on Windows yet; under Wine, TestRunUnderWine runs mcp-sandbox.exe with it and checks each grade claimed enforced against a hostile case",
}

func TestEveryBackendRunsTheContract(t *testing.T) {
	entries, err := os.ReadDir("engine/backend")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if why, ok := notBackends[e.Name()]; ok {
			if why == "" {
				t.Errorf("notBackends[%s] has no reason", e.Name())
			}
			continue
		}
		dir := "engine/backend/" + e.Name()
		files := goFiles(t, func(name string) bool { return path.Dir(name) == dir && strings.HasSuffix(name, "_test.go") })
		runs := false
		for _, f := range files {
			runs = runs || len(calls(f, "sandboxtest", "Run")) > 0
		}
		if !runs {
			t.Errorf("%s does not run the contract suite: call sandboxtest.Run from its tests (or say in notBackends why it is not a backend)", dir)
		}
	}
}

func TestEveryFuzzTargetIsInMakeFuzz(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	inMake := map[string]bool{}
	for _, m := range regexp.MustCompile(`test \./(\S+) .*-fuzz '\^(Fuzz\w+)\$\$'`).FindAllStringSubmatch(string(mk), -1) {
		inMake[m[1]+" "+m[2]] = true
	}
	files := goFiles(t, func(name string) bool { return strings.HasSuffix(name, "_test.go") })
	var missing []string
	for name, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				if key := path.Dir(name) + " " + fn.Name.Name; !inMake[key] {
					missing = append(missing, key)
				}
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		dir, name, _ := strings.Cut(m, " ")
		t.Errorf("fuzz target %s of ./%s is not in make fuzz; add: $(GO) test ./%s -run '^$$' -fuzz '^%s$$' -fuzztime $(FUZZTIME)", name, dir, dir, name)
	}
}

// The environment and files are read in cmd/, which turns flags, config and environment into
// plain values for the packages below it. The rule, precisely: outside cmd/ (and the black-box
// tests and benchmarks), no non-test file calls the os functions that read the environment or
// open a file, except in the packages named here with the reason.
var (
	envReads  = []string{"Getenv", "LookupEnv", "Environ", "ExpandEnv"}
	fileReads = []string{"ReadFile", "Open", "OpenFile", "ReadDir", "DirFS", "OpenRoot", "OpenInRoot"}

	envReaders = map[string]string{
		"internal/gate":               "the test gate reads MCP_SANDBOX_REQUIRE and MCP_SANDBOX_TEST_SCALE, and re-executes a test binary with its own environment",
		"internal/launch":             "the init helper is a program of its own: it reads its spec from its own environment, set by the host",
		"upstream":                    "a stdio upstream's environment is built from nothing but PATH and HOME, taken from ours",
		"internal/pgdb/pgtest":        "the tests' helper reads MCP_SANDBOX_TEST_PG_DSN, where CI's test database is",
		"budget/ledgertest":           "a ledger test's crash child is the test binary run again, told by its environment where the ledger is",
		"engine/backend/container":    "the container runtime's CLI runs with our environment, as any command we start; the container's own is built from nothing",
		"internal/testkit":            "a test's own Wine prefix has its server ended by wineserver run with our environment and that prefix",
		"internal/claudecode":         "claude runs with an environment built from nothing but our PATH, where the tests found it",
		"internal/inithelper/overlay": "a build program (make build's): it runs go build with our environment and the target's GOOS and GOARCH",
		"tools/*":                     "the build's programs, run by make: go build with our environment, and SOURCE_DATE_EPOCH for a reproducible archive",
	}
	fileReaders = map[string]string{
		"budget/sqlite":       "the run ledger's own file under data_dir, created 0600 before SQLite opens it",
		"configs":             "Load reads the file and tenants_dir that cmd names, so cmd, check and the tests share one strict loader",
		"outputs":             "the blob store's own files",
		"engine":              "artifacts, read from the workspace through os.Root; the canary it writes",
		"engine/backend/*":    "kernel facts under /proc and /sys",
		"engine/sandboxtest":  "/proc, to find a test's surviving processes",
		"internal/*":          "the init helper, cgroups and interpreter discovery: /proc, /sys/fs/cgroup, the interpreter",
		"upstream":            "/proc, to find every process of a stdio server's tree when it is killed (tree_linux.go)",
		"toolshape/shapetest": "a stub a test wrote, shown when Python refuses it",
		"tools/*":             "the build's programs read the binaries they pack and dist/'s manifests, in the module's root",
	}
)

func readerAllowed(m map[string]string, rel string) bool {
	for k := range m {
		if k == rel || strings.HasSuffix(k, "/*") && strings.HasPrefix(rel, strings.TrimSuffix(k, "*")) {
			return true
		}
	}
	return false
}

func TestEnvAndFileReadsInCmd(t *testing.T) {
	for _, m := range []map[string]string{envReaders, fileReaders} {
		for k, why := range m {
			if strings.TrimSpace(why) == "" {
				t.Errorf("exception %s has no reason", k)
			}
		}
	}
	for _, goos := range platforms {
		for _, p := range listPackages(t, goos) {
			if exempt(p.rel()) {
				continue
			}
			for _, name := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
				f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				if got := calls(f, "os", envReads...); len(got) > 0 && !readerAllowed(envReaders, p.rel()) {
					t.Errorf("GOOS=%s: %s/%s reads the environment (%s): read it in cmd/ and pass the value down, or add the package to envReaders with why",
						goos, p.rel(), name, strings.Join(got, ", "))
				}
				if got := calls(f, "os", fileReads...); len(got) > 0 && !readerAllowed(fileReaders, p.rel()) {
					t.Errorf("GOOS=%s: %s/%s opens files (%s): read them in cmd/ and pass the contents down, or add the package to fileReaders with why",
						goos, p.rel(), name, strings.Join(got, ", "))
				}
			}
		}
	}
}

// TestEveryTestIsInALayer: each package with tests is run by exactly one layer of the Makefile
// (test, integration, conformance), so none is forgotten by make and CI.
func TestEveryTestIsInALayer(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	layer := func(name string) []string {
		m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(.*)$`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("the Makefile defines no %s", name)
		}
		return strings.Fields(string(m[1]))
	}
	layers := map[string][]string{"test": layer("FAST_PKGS"), "integration": layer("INTEG_PKGS"), "conformance": {"./conformance/..."}}
	cmd := exec.Command("go", "list", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}", "./...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range strings.Fields(string(out)) {
		rel := "." + strings.TrimPrefix(imp, module)
		var in []string
		for name, pats := range layers {
			for _, pat := range pats {
				if pat == rel || strings.HasSuffix(pat, "/...") && (rel == strings.TrimSuffix(pat, "/...") || strings.HasPrefix(rel, strings.TrimSuffix(pat, "..."))) {
					in = append(in, name)
				}
			}
		}
		if len(in) != 1 {
			t.Errorf("%s has tests run by %d layers (%v): name it in exactly one of FAST_PKGS and INTEG_PKGS (conformance/ is its own)", rel, len(in), in)
		}
	}
}

// TestOptionsByPointer: an exported function takes its options as *XxxOptions, where nil means
// defaults (the go-sdk's convention), never by value.
func TestOptionsByPointer(t *testing.T) {
	files := goFiles(t, func(name string) bool { return !strings.HasSuffix(name, "_test.go") && !exempt(path.Dir(name)) })
	for name, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			for _, field := range fn.Type.Params.List {
				var id string
				switch x := field.Type.(type) {
				case *ast.Ident:
					id = x.Name
				case *ast.SelectorExpr:
					id = x.Sel.Name
				}
				if strings.HasSuffix(id, "Options") {
					t.Errorf("%s: %s takes %s by value: take *%s, nil meaning defaults", name, fn.Name.Name, id, id)
				}
			}
		}
	}
}

// flocks are the calls in f that take a file lock themselves.
func flocks(f *ast.File) []string {
	return append(calls(f, "unix", "Flock", "FcntlFlock"), calls(f, "syscall", "Flock", "FcntlFlock")...)
}

// TestFlocksInOwner: no product file outside internal/owner takes a file lock: every lock
// whose holder's death must free it (an owner's, a store's, a lease, a file in use) is
// owner's, which says what each proves (docs/design.md §6.9).
func TestFlocksInOwner(t *testing.T) {
	files := goFiles(t, func(name string) bool {
		return !strings.HasSuffix(name, "_test.go") && !strings.HasPrefix(name, "internal/owner/")
	})
	for name, f := range files {
		if got := flocks(f); len(got) > 0 {
			t.Errorf("%s takes a file lock itself (%s): take it through internal/owner (Hold, Lease, Share), the one home of the host's flocks", name, strings.Join(got, ", "))
		}
	}
}

// systems are the GOOS values (and unix) a file's name or build constraint may pick.
var systems = []string{"linux", "darwin", "windows", "unix", "freebsd", "openbsd", "netbsd", "dragonfly",
	"solaris", "illumos", "aix", "android", "ios", "plan9", "js", "wasip1"}

// platformViolation says how the file name of source src is for some systems only (its
// name's _GOOS suffix, or a system in its //go:build line), or "".
func platformViolation(name, src string) string {
	base := strings.TrimSuffix(path.Base(name), ".go")
	if i := strings.LastIndex(base, "_"); i >= 0 && slices.Contains(systems, base[i+1:]) {
		return fmt.Sprintf("%s builds for %s only, by its name", name, base[i+1:])
	}
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(line, "package ") {
			break
		}
		if !constraint.IsGoBuild(line) {
			continue
		}
		expr, err := constraint.Parse(line)
		if err != nil {
			return fmt.Sprintf("%s: %v", name, err)
		}
		var named []string
		expr.Eval(func(tag string) bool {
			if slices.Contains(systems, tag) {
				named = append(named, tag)
			}
			return true
		})
		if len(named) > 0 {
			return fmt.Sprintf("%s builds by system (%s)", name, strings.Join(named, ", "))
		}
	}
	return ""
}

// platformFilesInCmd are the command's files that may be some systems' only, each with why.
var platformFilesInCmd = map[string]string{
	"cmd/mcp-sandbox/linkmode_cgo.go": "no code: it links a cgo build with the system's linker on Linux, for the init helper's start (docs/design.md §19.1)",
}

// TestNoPlatformFilesInCmd: the command has no per-system file (a name's _linux, a
// //go:build darwin): every backend package builds everywhere and answers for itself where
// it does not run, so one switch opens them all on every system (docs/design.md §4.1). Its
// tests may be a system's, and platformFilesInCmd names the exceptions.
func TestNoPlatformFilesInCmd(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "cmd/mcp-sandbox/*.go").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Fields(string(out)) {
		if path.Dir(name) != "cmd/mcp-sandbox" || strings.HasSuffix(name, "_test.go") || platformFilesInCmd[name] != "" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if why := platformViolation(name, string(src)); why != "" {
			t.Errorf("%s: the command keeps no per-system file; let the backend package answer for itself where it does not run", why)
		}
	}
}
