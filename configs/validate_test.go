package configs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every validation message, each naming the key path and line that caused it.
func TestValidationProblems(t *testing.T) {
	checkProblems(t, "t.yaml", []problemCase{
		{
			name: "profiles",
			data: doc(
				"profiles:",
				"  default:",
				"    backend: vm",
				"    isolation: strong",
				"    run_as: nobody",
				"    env_allowlist: [PATH, 'LC_*', 1BAD]",
				"  weak:",
				"    backend: process",
				"    isolation: isolated",
				"    run_as: \"200-100\"",
				"  big:",
				"    run_as: \"0:4294967295\"",
				"  range:",
				"    run_as: \"100000-4294967296\"",
				"  -bad-: {}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:3: profiles.default.backend: unknown backend "vm" (one of local, process, namespaces, bwrap, container, remote)`,
				`t.yaml:4: profiles.default.isolation: unknown isolation "strong" (one of process, isolated)`,
				`t.yaml:5: profiles.default.run_as: "nobody" is not an identity: want "uid:gid" or a range "first-last"`,
				`t.yaml:6: profiles.default.env_allowlist[1]: "LC_*" is not an environment variable name`,
				`t.yaml:6: profiles.default.env_allowlist[2]: "1BAD" is not an environment variable name`,
				`t.yaml:9: profiles.weak.isolation: backend "process" cannot reach isolation "isolated": it has no kernel boundary (use local, namespaces, bwrap, container or remote)`,
				`t.yaml:10: profiles.weak.run_as: "200-100": range starts after it ends`,
				`t.yaml:12: profiles.big.run_as: "0:4294967295": id out of range (0 to 4294967294)`,
				`t.yaml:14: profiles.range.run_as: "100000-4294967296": id out of range (0 to 4294967294)`,
				`t.yaml:15: profiles.-bad-: invalid profile name "-bad-": use letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most 64 characters`,
			},
		},
		{
			name: "limits and budgets must be positive",
			data: doc(
				"profiles:",
				"  default:",
				"    hard_limits: {cpu_seconds: 0, wall_seconds: -1, memory_bytes: 0, file_size_bytes: 0, process_count: 0}",
				"    binding_budget: {max_calls: 0, max_total_bytes: 0, max_produced_bytes: 0, max_preserved_bytes: 0, max_argument_bytes: 0, max_result_bytes: 0}",
				"  nan:",
				"    hard_limits: {cpu_seconds: .nan, wall_seconds: .inf}",
				"tenants:",
				"  t:",
				"    policy:",
				"      limits: {wall_seconds: 0, process_count: -2}",
				"      binding_budget: {max_calls: -1}",
				"    agents:",
				"      a: {code_execution: {limits: {memory_bytes: 0, cpu_seconds: -0.5}}}",
			),
			want: []string{
				`t.yaml:3: profiles.default.hard_limits.cpu_seconds: must be a positive number of seconds, got 0`,
				`t.yaml:3: profiles.default.hard_limits.wall_seconds: must be a positive number of seconds, got -1`,
				`t.yaml:3: profiles.default.hard_limits.memory_bytes: must be positive, got 0`,
				`t.yaml:3: profiles.default.hard_limits.file_size_bytes: must be positive, got 0`,
				`t.yaml:3: profiles.default.hard_limits.process_count: must be positive, got 0`,
				`t.yaml:4: profiles.default.binding_budget.max_calls: must be positive, got 0`,
				`t.yaml:4: profiles.default.binding_budget.max_total_bytes: must be positive, got 0`,
				`t.yaml:4: profiles.default.binding_budget.max_produced_bytes: must be positive, got 0`,
				`t.yaml:4: profiles.default.binding_budget.max_preserved_bytes: must be positive, got 0`,
				`t.yaml:4: profiles.default.binding_budget.max_argument_bytes: must be positive, got 0`,
				`t.yaml:4: profiles.default.binding_budget.max_result_bytes: must be positive, got 0`,
				`t.yaml:6: profiles.nan.hard_limits.cpu_seconds: must be a positive number of seconds, got NaN`,
				`t.yaml:6: profiles.nan.hard_limits.wall_seconds: must be a positive number of seconds, got +Inf`,
				`t.yaml:10: tenants.t.policy.limits.wall_seconds: must be a positive number of seconds, got 0`,
				`t.yaml:10: tenants.t.policy.limits.process_count: must be positive, got -2`,
				`t.yaml:11: tenants.t.policy.binding_budget.max_calls: must be positive, got -1`,
				`t.yaml:13: tenants.t.agents.a.code_execution.limits.memory_bytes: must be positive, got 0`,
				`t.yaml:13: tenants.t.agents.a.code_execution.limits.cpu_seconds: must be a positive number of seconds, got -0.5`,
			},
		},
		{
			name: "container",
			data: doc(
				"profiles:",
				"  boxed:",
				"    backend: container",
				"    python: /usr/bin/python3",
				"    container: {runtime: lxc, image: 'Python:3.12', python: usr/bin/python3, oci_runtime: 'run c'}",
				"  relative:",
				"    backend: container",
				"    container: {runtime: bin/podman, image: 'python:3.12 slim', python: /usr/bin/../bin/python3}",
				"  pinned:",
				"    backend: container",
				"    container: {runtime: /usr/bin/docker, image: 'registry.internal:5000/py/python@sha256:"+strings.Repeat("ab", 32)+"', oci_runtime: runsc}",
				"  native:",
				"    backend: namespaces",
				"    container: {image: python}",
				"  desktop:",
				"    backend: local",
				"    python: /usr/bin/python3",
				`    container: {runtime: 'C:\Program Files\Docker\Docker\resources\bin\docker.exe'}`,
				"  windows:",
				"    backend: container",
				`    container: {runtime: 'C:\tools\lxc.exe'}`,
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:4: profiles.boxed.python: is the host's interpreter, which a container does not run; set container.python, the interpreter's path inside the image`,
				`t.yaml:5: profiles.boxed.container.runtime: unknown runtime "lxc" (docker, podman, or an absolute path to either, docker.exe or podman.exe on Windows; empty takes whichever answers)`,
				`t.yaml:5: profiles.boxed.container.image: "Python:3.12" is not an image reference (name[:tag] or name@sha256:<64 hex digits>, the name in lowercase, e.g. localhost/mcp-sandbox-python:latest)`,
				`t.yaml:5: profiles.boxed.container.python: "usr/bin/python3" is not an absolute, clean path inside the image (e.g. /usr/bin/python3)`,
				`t.yaml:5: profiles.boxed.container.oci_runtime: "run c" is neither an OCI runtime's name (runc, crun, runsc) nor an absolute path to one`,
				`t.yaml:8: profiles.relative.container.runtime: unknown runtime "bin/podman" (docker, podman, or an absolute path to either, docker.exe or podman.exe on Windows; empty takes whichever answers)`,
				`t.yaml:8: profiles.relative.container.image: "python:3.12 slim" is not an image reference (name[:tag] or name@sha256:<64 hex digits>, the name in lowercase, e.g. localhost/mcp-sandbox-python:latest)`,
				`t.yaml:8: profiles.relative.container.python: "/usr/bin/../bin/python3" is not an absolute, clean path inside the image (e.g. /usr/bin/python3)`,
				`t.yaml:14: profiles.native.container: applies only to backend "container", and to "local", which takes it on macOS and Windows (this profile's backend is "namespaces")`,
				`t.yaml:21: profiles.windows.container.runtime: unknown runtime "C:\\tools\\lxc.exe" (docker, podman, or an absolute path to either, docker.exe or podman.exe on Windows; empty takes whichever answers)`,
			},
		},
		{
			name: "output and artifacts",
			data: doc(
				`data_dir: "-"`,
				"profiles:",
				"  default:",
				"    output: {preview_bytes: 2MiB, max_bytes: 1MiB, preserve: always}",
				"    artifacts: {collection: all, max_files: 0, max_bytes: 0}",
				"  keep:",
				"    output: {preserve: required}",
				"  small:",
				"    output: {preview_bytes: 0, max_bytes: 0}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:4: profiles.default.output.preview_bytes: 2097152 is more than output.max_bytes (1048576): a preview cannot show more than was captured`,
				`t.yaml:4: profiles.default.output.preserve: unknown preserve "always" (one of when_available, required)`,
				`t.yaml:5: profiles.default.artifacts.collection: unknown collection "all" (one of collect, ignore)`,
				`t.yaml:5: profiles.default.artifacts.max_files: must be positive, got 0`,
				`t.yaml:5: profiles.default.artifacts.max_bytes: must be positive, got 0`,
				`t.yaml:7: profiles.keep.output.preserve: "required" needs a blob store, and data_dir "-" means there is none`,
				`t.yaml:9: profiles.small.output.preview_bytes: must be positive, got 0`,
				`t.yaml:9: profiles.small.output.max_bytes: must be positive, got 0`,
			},
		},
		{
			name: "warm pools",
			data: doc(
				"profiles:",
				"  default:",
				"    warm: {min: 5, max: 2, idle_seconds: 0}",
				"  huge:",
				"    warm: {min: -1, max: 100}",
				"  raised:",
				"    warm: {min: 6}",
				"  none:",
				"    warm: {min: 0, max: 0}",
				"  forked:",
				"    warm: {start: template}",
				"  zygote:",
				"    warm: {start: zygote}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:3: profiles.default.warm.max: 2 is less than warm.min (5)`,
				`t.yaml:3: profiles.default.warm.idle_seconds: must be a positive number of seconds, got 0`,
				`t.yaml:5: profiles.huge.warm.min: must be from 0 to 64, got -1`,
				`t.yaml:5: profiles.huge.warm.max: must be from 0 to 64, got 100`,
				`t.yaml:13: profiles.zygote.warm.start: unknown warm start "zygote" (one of auto, exec, template)`,
			},
		},
		{
			name: "upstreams",
			data: doc(
				"profiles: {default: {}}",
				"upstreams:",
				"  both: {command: [x], url: https://x.example}",
				"  neither: {deferred: true}",
				"  Caps: {command: [x]}",
				"  two__parts: {command: [x]}",
				"  -dash: {command: [x]}",
				"  empty-prog: {command: ['']}",
				"  env-url: {url: https://x.example, env: {A: b}}",
				"  bad-env: {command: [x], env: {1A: b}, bearer: {env: T}, allow_insecure_http: true}",
				"  ftp: {url: ftp://x.example}",
				"  nohost: {url: 'https:///mcp'}",
				"  badurl: {url: 'http://[::1'}",
				"  plain: {url: http://docs.example/mcp, bearer: {env: T}}",
				"  plain-ok: {url: http://docs.example/mcp, bearer: {env: T}, allow_insecure_http: true}",
				"  loop4: {url: http://127.0.0.1:8080/mcp, bearer: {env: T}}",
				"  loop6: {url: 'http://[::1]:8080/mcp', bearer: {env: T}}",
				"  loopname: {url: http://localhost/mcp, bearer: {file: /t}}",
				"  noauth: {url: http://docs.example/mcp}",
				"  cred-both: {url: https://x.example, bearer: {env: T, file: /t}}",
				"  cred-none: {url: https://x.example, bearer: {}}",
				"  cred-name: {url: https://x.example, bearer: {env: 'A-B'}}",
				"  peer: {a2a: {url: https://agent.example, bearer: {env: T}}, deferred: true}",
				"  peer-both: {command: [x], a2a: {url: https://a.example}}",
				"  peer-nourl: {a2a: {}}",
				"  peer-plain: {a2a: {url: http://agent.example, bearer: {env: T}}}",
				"  peer-plain-ok: {a2a: {url: http://agent.example, bearer: {file: /t}, allow_insecure_http: true}}",
				"  peer-loop: {a2a: {url: 'http://127.0.0.1:9/', bearer: {env: T}}}",
				"  peer-outer: {a2a: {url: https://a.example}, bearer: {env: T}}",
				"  peer-cred: {a2a: {url: https://a.example, bearer: {env: T, file: /t}}}",
				"  peer-ftp: {a2a: {url: ftp://a.example}}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:3: upstreams.both: command and url are both set; an upstream is one of command, url or a2a`,
				`t.yaml:4: upstreams.neither: exactly one of command, url or a2a is required`,
				`t.yaml:5: upstreams.Caps: invalid upstream name "Caps": use lowercase letters and digits, words joined by a single '-' or '_' (tool names are <upstream>__<tool>, so an upstream name never contains "__")`,
				`t.yaml:6: upstreams.two__parts: invalid upstream name "two__parts": use lowercase letters and digits, words joined by a single '-' or '_' (tool names are <upstream>__<tool>, so an upstream name never contains "__")`,
				`t.yaml:7: upstreams.-dash: invalid upstream name "-dash": use lowercase letters and digits, words joined by a single '-' or '_' (tool names are <upstream>__<tool>, so an upstream name never contains "__")`,
				`t.yaml:8: upstreams.empty-prog.command[0]: the program must not be empty`,
				`t.yaml:9: upstreams.env-url.env: applies only to a command upstream`,
				`t.yaml:10: upstreams.bad-env.env.1A: "1A" is not an environment variable name`,
				`t.yaml:10: upstreams.bad-env.bearer: applies only to a url upstream (an a2a peer's goes under a2a)`,
				`t.yaml:10: upstreams.bad-env.allow_insecure_http: applies only to a url upstream (an a2a peer's goes under a2a)`,
				`t.yaml:11: upstreams.ftp.url: the scheme must be http or https`,
				`t.yaml:12: upstreams.nohost.url: the URL has no host`,
				`t.yaml:13: upstreams.badurl.url: not a valid URL`,
				`t.yaml:14: upstreams.plain.bearer: a credential is refused over plaintext http to a non-loopback host; use https, or set allow_insecure_http: true if the network in between is trusted`,
				`t.yaml:20: upstreams.cred-both.bearer: set exactly one of env or file`,
				`t.yaml:21: upstreams.cred-none.bearer: set exactly one of env or file`,
				`t.yaml:22: upstreams.cred-name.bearer.env: "A-B" is not an environment variable name`,
				`t.yaml:24: upstreams.peer-both: command and a2a are both set; an upstream is one of command, url or a2a`,
				`t.yaml:25: upstreams.peer-nourl.a2a.url: the peer's URL is required (its agent card is read from .well-known/agent-card.json below it)`,
				`t.yaml:26: upstreams.peer-plain.a2a.bearer: a credential is refused over plaintext http to a non-loopback host; use https, or set allow_insecure_http: true if the network in between is trusted`,
				`t.yaml:29: upstreams.peer-outer.bearer: applies only to a url upstream (an a2a peer's goes under a2a)`,
				`t.yaml:30: upstreams.peer-cred.a2a.bearer: set exactly one of env or file`,
				`t.yaml:31: upstreams.peer-ftp.a2a.url: the scheme must be http or https`,
			},
		},
		{
			name: "upstream oauth",
			data: doc(
				"profiles: {default: {}}",
				"upstreams:",
				"  crm: {url: https://crm.example/mcp, oauth: {issuer: https://login.example, client_id: x, client_secret: {env: S}, scopes: [crm.write], resource: https://crm.example/mcp}}",
				"  found: {url: https://crm.example/mcp, oauth: {client_id: x, client_secret: {file: /s}}}",
				"  peer: {a2a: {url: https://agent.example}, oauth: {client_id: x, client_secret: {env: S}}}",
				"  cmd: {command: [x], oauth: {client_id: x, client_secret: {env: S}}}",
				"  both: {url: https://crm.example/mcp, bearer: {env: T}, oauth: {client_id: x, client_secret: {env: S}}}",
				"  noid: {url: https://crm.example/mcp, oauth: {client_secret: {}}}",
				"  badiss: {url: https://crm.example/mcp, oauth: {issuer: http://login.example, client_id: x, client_secret: {env: S}, scopes: ['a b'], resource: 'crm'}}",
				"  plain: {url: http://crm.example/mcp, oauth: {client_id: x, client_secret: {env: S}}}",
				"  plain-ok: {url: http://crm.example/mcp, allow_insecure_http: true, oauth: {client_id: x, client_secret: {env: S}}}",
				"  loop: {url: http://127.0.0.1:9/mcp, oauth: {client_id: x, client_secret: {env: S}}}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:6: upstreams.cmd.oauth: applies only to a url or a2a upstream (a command upstream is not reached over HTTP)`,
				`t.yaml:7: upstreams.both.oauth: oauth and bearer are both set; an upstream gets its credential one way`,
				`t.yaml:8: upstreams.noid.oauth.client_id: required: the client the authorization server registered for this server`,
				`t.yaml:8: upstreams.noid.oauth.client_secret: set exactly one of env or file`,
				`t.yaml:9: upstreams.badiss.oauth.issuer: must be an https URL (http only on a loopback host)`,
				`t.yaml:9: upstreams.badiss.oauth.scopes[0]: a scope is a non-empty token without spaces or quotes`,
				`t.yaml:9: upstreams.badiss.oauth.resource: must be an absolute http or https URL without a fragment (RFC 8707)`,
				`t.yaml:10: upstreams.plain.oauth: an access token is refused over plaintext http to a non-loopback host; use https, or set allow_insecure_http: true if the network in between is trusted`,
			},
		},
		{
			name: "no tenants",
			data: doc("profiles: {default: {}}"),
			want: []string{`t.yaml: tenants: no tenant is defined; define one here or set tenants_dir`},
		},
		{
			name: "tenants",
			data: doc(
				"profiles: {default: {}}",
				"upstreams: {docs: {command: [d]}, support: {command: [s]}}",
				"tenants:",
				"  acme:",
				"    tokens:",
				"      - sha256:0b36bc3241c198bd6e2ca4d0fe4c390a89b31fdde7fc287bd7a4617df307090f",
				"      - sha256:0B36BC3241C198BD6E2CA4D0FE4C390A89B31FDDE7FC287BD7A4617DF307090F",
				"      - my-plain-token",
				"      - sha256:0b36bc3241c198bd6e2ca4d0fe4c390a89b31fdde7fc287bd7a4617df307090f",
				"    upstreams: [docs, docs, nope]",
				"    agents: {a: {}}",
				"  beta:",
				"    tokens: [sha256:0b36bc3241c198bd6e2ca4d0fe4c390a89b31fdde7fc287bd7a4617df307090f]",
				"  'no spaces': {agents: {a: {}}}",
			),
			want: []string{
				`t.yaml:7: tenants.acme.tokens[1]: must be "sha256:" followed by 64 lowercase hex digits (the SHA-256 of the token, never the token)`,
				`t.yaml:8: tenants.acme.tokens[2]: must be "sha256:" followed by 64 lowercase hex digits (the SHA-256 of the token, never the token)`,
				`t.yaml:9: tenants.acme.tokens[3]: token already given at tenants.acme.tokens[0]; a token identifies exactly one tenant`,
				`t.yaml:10: tenants.acme.upstreams[1]: upstream "docs" is granted twice`,
				`t.yaml:10: tenants.acme.upstreams[2]: unknown upstream "nope" (defined: docs, support)`,
				`t.yaml:12: tenants.beta.agents: no agent is defined; a session must name one`,
				`t.yaml:13: tenants.beta.tokens[0]: token already given at tenants.acme.tokens[0]; a token identifies exactly one tenant`,
				`t.yaml:14: tenants["no spaces"]: invalid tenant name "no spaces": use letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most 64 characters`,
			},
		},
		{
			name: "policy patterns",
			data: doc(
				"profiles: {default: {}}",
				"upstreams: {docs: {command: [d]}}",
				"tenants:",
				"  t:",
				"    upstreams: [docs]",
				"    policy:",
				"      deny: ['docs__delete*', 'doc__delete*', '*__drop', 'delete_repo', run_code, list_tools, 'docs__[', '']",
				"      approval_required: ['*', 'd*', 'github__*']",
				"    agents: {a: {}}",
			),
			want: []string{
				`t.yaml:7: tenants.t.policy.deny[1]: pattern "doc__delete*" names unknown upstream "doc" (defined: docs)`,
				`t.yaml:7: tenants.t.policy.deny[3]: pattern "delete_repo" can match no tool: upstream tools are named <upstream>__<tool>`,
				`t.yaml:7: tenants.t.policy.deny[4]: pattern "run_code" names a built-in tool; deny, approval_required and rules apply to upstream tools (<upstream>__<tool>) only`,
				`t.yaml:7: tenants.t.policy.deny[5]: pattern "list_tools" names a built-in tool; deny, approval_required and rules apply to upstream tools (<upstream>__<tool>) only`,
				`t.yaml:7: tenants.t.policy.deny[6]: invalid pattern "docs__[" (a glob: * ? [...])`,
				`t.yaml:7: tenants.t.policy.deny[7]: invalid pattern "" (a glob: * ? [...])`,
				`t.yaml:8: tenants.t.policy.approval_required[2]: pattern "github__*" names unknown upstream "github" (defined: docs)`,
			},
		},
		{
			name: "saved programs",
			data: doc(
				"profiles: {default: {approvals: {plan_seconds: 0}}}",
				"tenants:",
				"  t:",
				"    agents:",
				"      a: {programs: {propose: true}}",
				"      b: {code_execution: {}, programs: {prefix: 'my__tools'}}",
				"      c: {code_execution: {}, programs: {prefix: 'mine', propose: true}}",
			),
			want: []string{
				`t.yaml:1: profiles.default.approvals.plan_seconds: must be a positive number of seconds, got 0`,
				`t.yaml:5: tenants.t.agents.a.programs: saved programs are programs: the agent needs code_execution`,
				`t.yaml:6: tenants.t.agents.b.programs.prefix: invalid prefix "my__tools": a lowercase Python name of at most 32 characters without "__"`,
			},
		},
		{
			name: "argument rules and approvals",
			data: doc(
				"profiles: {default: {approvals: {timeout_seconds: 0}}, long: {approvals: {timeout_seconds: 90000}}}",
				"upstreams: {docs: {command: [d]}}",
				"tenants:",
				"  t:",
				"    upstreams: [docs]",
				"    policy:",
				"      destructive_needs_approval: false",
				"      rules:",
				"        - {tool: 'docs__*', argument: repo, allow: [acme/web], otherwise: deny}",
				"        - {tool: 'gh__*', argument: 'a..b', pattern: '(', otherwise: ask}",
				"        - {tool: 'docs__x', argument: repo, allow: [a], pattern: 'a'}",
				"        - {argument: repo, allow: []}",
				"        - {tool: 'docs__x', otherwise: deny}",
				"    agents: {a: {}}",
			),
			want: []string{
				`t.yaml:1: profiles.default.approvals.timeout_seconds: must be a positive number of seconds, got 0`,
				`t.yaml:1: profiles.long.approvals.timeout_seconds: 90000 is more than a day (86400 seconds); a call would hold its program and its host that long`,
				`t.yaml:10: tenants.t.policy.rules[1].tool: pattern "gh__*" names unknown upstream "gh" (defined: docs)`,
				`t.yaml:10: tenants.t.policy.rules[1].argument: "a..b" is not a path of keys joined by "." (no empty key, no control character)`,
				"t.yaml:10: tenants.t.policy.rules[1].pattern: not a regular expression (RE2 syntax): error parsing regexp: missing closing ): `^(?:()$`",
				`t.yaml:10: tenants.t.policy.rules[1].otherwise: unknown otherwise "ask" (one of deny, approval_required)`,
				`t.yaml:11: tenants.t.policy.rules[2]: give allow or pattern, not both`,
				`t.yaml:11: tenants.t.policy.rules[2].otherwise: is required: deny or approval_required`,
				`t.yaml:12: tenants.t.policy.rules[3].otherwise: is required: deny or approval_required`,
				`t.yaml:12: tenants.t.policy.rules[3].tool: is required: a glob over <upstream>__<tool> names`,
				`t.yaml:12: tenants.t.policy.rules[3].allow: is empty, so nothing is allowed; use otherwise: deny on a rule with a pattern that matches nothing, or remove the rule`,
				`t.yaml:13: tenants.t.policy.rules[4]: give allow (a list of values) or pattern (a regular expression): what the argument may be`,
				`t.yaml:13: tenants.t.policy.rules[4].argument: is required: the argument's name, or a path of keys joined by "." (target.owner)`,
			},
		},
		{
			name: "agents and code execution",
			data: doc(
				"profiles: {default: {}}",
				"upstreams: {docs: {command: [d]}, support: {command: [s]}}",
				"tenants:",
				"  acme:",
				"    upstreams: [docs]",
				"    agents:",
				"      run_code: {}",
				"      analyst:",
				"        code_execution:",
				"          profile: heavy",
				"          isolation: vm",
				"          network: open",
				"      coder:",
				"        code_execution:",
				"          network: unrestricted",
				"          bindings:",
				"            - run_code",
				"            - list_tools",
				"            - get_tool_info",
				"            - read_tool_output",
				"            - docs__search",
				"            - docs__*",
				"            - docs__search",
				"            - support__lookup",
				"            - nope__x",
				"            - lookup",
				"            - __x",
				"            - docs__",
				"            - docs__get_*",
				"            - docs__a__b",
				"      'bad agent': {}",
			),
			want: []string{
				`t.yaml:7: tenants.acme.agents.run_code: "run_code" is a reserved tool name and cannot name an agent`,
				`t.yaml:10: tenants.acme.agents.analyst.code_execution.profile: unknown profile "heavy" (defined: default)`,
				`t.yaml:11: tenants.acme.agents.analyst.code_execution.isolation: unknown isolation "vm" (one of process, isolated)`,
				`t.yaml:12: tenants.acme.agents.analyst.code_execution.network: unknown network "open" (one of none, rules, unrestricted)`,
				`t.yaml:17: tenants.acme.agents.coder.code_execution.bindings[0]: "run_code" is reserved: a program cannot call run_code`,
				`t.yaml:23: tenants.acme.agents.coder.code_execution.bindings[6]: binding "docs__search" is listed twice`,
				`t.yaml:24: tenants.acme.agents.coder.code_execution.bindings[7]: upstream "support" is not granted to tenant "acme" (granted: docs)`,
				`t.yaml:25: tenants.acme.agents.coder.code_execution.bindings[8]: upstream "nope" is not granted to tenant "acme" (granted: docs)`,
				`t.yaml:26: tenants.acme.agents.coder.code_execution.bindings[9]: "lookup" is neither a built-in (list_tools, get_tool_info, read_tool_output) nor <upstream>__<tool>`,
				`t.yaml:27: tenants.acme.agents.coder.code_execution.bindings[10]: "__x" is neither a built-in (list_tools, get_tool_info, read_tool_output) nor <upstream>__<tool>`,
				`t.yaml:28: tenants.acme.agents.coder.code_execution.bindings[11]: "docs__" names no tool; use docs__<tool>, or docs__* for all of them`,
				`t.yaml:29: tenants.acme.agents.coder.code_execution.bindings[12]: "docs__get_*": the only wildcard is a whole tool name, docs__*`,
				`t.yaml:31: tenants.acme.agents["bad agent"]: invalid agent name "bad agent": use letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most 64 characters`,
			},
		},
		{
			name: "an empty bindings list is valid and means none",
			data: doc(
				"profiles: {default: {}}",
				"tenants: {t: {agents: {a: {code_execution: {bindings: []}}}}}",
			),
		},
		{
			name: "network unrestricted is a run-time question",
			data: doc(
				"profiles: {default: {allow_network: false}}",
				"tenants: {t: {policy: {allow_network: false}, agents: {a: {code_execution: {network: unrestricted, isolation: isolated}}}}}",
			),
		},
		{
			name: "ledger and blobs on postgres",
			data: doc(
				"data_dir: '-'",
				"ledger: {postgres: {dsn: {env: PG_DSN}, lease_seconds: 5}}",
				"blobs: {postgres: {dsn: {file: secrets/dsn}}}",
				"profiles: {default: {output: {preserve: required}}}",
				"tenants: {t: {agents: {a: {}}}}",
			),
		},
		{
			name: "ledger and blobs name their store and a credential reference",
			data: doc(
				"ledger: {postgres: {dsn: {env: 'not a name'}, lease_seconds: 0.5}}",
				"blobs: {}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:1: ledger.postgres.dsn.env: "not a name" is not an environment variable name`,
				`t.yaml:1: ledger.postgres.lease_seconds: 0.5 is outside 1 to 3600`,
				`t.yaml:2: blobs: set postgres: {dsn: {env: NAME}}, or remove blobs for files under data_dir`,
			},
		},
		{
			name: "a DSN is a reference, never the secret",
			data: doc(
				"ledger: {postgres: {dsn: 'postgres://u:hunter2@db/x'}}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:1: ledger.postgres.dsn: expected a mapping {env: NAME} or {file: PATH}, got a string: a credential is a reference, never the secret itself`,
			},
		},
		{
			name: "quotas",
			data: doc(
				"quotas: {max_concurrent_executions: 0, max_sessions: 10, max_stored_bytes: 1GiB}",
				"tenants:",
				"  t:",
				"    policy:",
				"      quotas: {max_concurrent_executions: -1, queue_seconds: -1, max_sessions: 11, max_stored_bytes: 2GiB}",
				"    agents: {a: {}}",
				"  u:",
				"    policy: {quotas: {queue_seconds: 3601, max_sessions: 10, max_stored_bytes: 0}}",
				"    agents: {a: {}}",
			),
			want: []string{
				`t.yaml:1: quotas.max_concurrent_executions: must be positive, got 0`,
				`t.yaml:5: tenants.t.policy.quotas.max_concurrent_executions: must be positive, got -1`,
				`t.yaml:5: tenants.t.policy.quotas.queue_seconds: must be from 0 (refuse at once when every slot is busy) to 3600 seconds, got -1`,
				`t.yaml:5: tenants.t.policy.quotas.max_sessions: 11 is more than the server's quotas.max_sessions (10), so it can never be reached; lower it, or raise quotas.max_sessions`,
				`t.yaml:5: tenants.t.policy.quotas.max_stored_bytes: 2147483648 is more than the server's quotas.max_stored_bytes (1073741824), so it can never be reached; lower it, or raise quotas.max_stored_bytes`,
				`t.yaml:8: tenants.u.policy.quotas.queue_seconds: must be from 0 (refuse at once when every slot is busy) to 3600 seconds, got 3601`,
				`t.yaml:8: tenants.u.policy.quotas.max_stored_bytes: must be positive, got 0`,
			},
		},
		{
			name: "problems from every part, sorted by line",
			data: doc(
				"tenants:",
				"  t:",
				"    agents: {a: {code_execution: {profile: q}}}",
				"profiles:",
				"  p: {backend: x}",
			),
			want: []string{
				`t.yaml:3: tenants.t.agents.a.code_execution.profile: unknown profile "q" (defined: p)`,
				`t.yaml:5: profiles.p.backend: unknown backend "x" (one of local, process, namespaces, bwrap, container, remote)`,
			},
		},
	})
}

// Validate on a hand-built Config: zero values are the defaults, problems are sorted by path
// and carry no position.
func TestValidateHandBuilt(t *testing.T) {
	c := &Config{
		Profiles: map[string]Profile{"default": {}},
		Tenants: map[string]Tenant{"t": {Agents: map[string]Agent{
			"a": {CodeExecution: &CodeExecution{}},
		}}},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if c.Profiles["default"].Backend != "" {
		t.Error("Validate modified the Config")
	}
	c.Profiles["default"] = Profile{Backend: "vm"}
	c.Tenants["t"].Agents["b"] = Agent{CodeExecution: &CodeExecution{Profile: "heavy"}}
	c.Sandbox = &Profile{}
	want := []string{
		`profiles.default.backend: unknown backend "vm" (one of local, process, namespaces, bwrap, container, remote)`,
		`sandbox: conflicts with profiles.default: the sandbox block is the profile named "default"; keep one`,
		`tenants.t.agents.b.code_execution.profile: unknown profile "heavy" (defined: default)`,
	}
	if diff := cmp.Diff(want, problemsOf(t, c.Validate())); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// A profile's network block and the server-wide egress rules are validated in the rule
// language of package egress; an agent asking for rules needs a profile that has them.
func TestValidateNetworkRules(t *testing.T) {
	_, err := Parse([]byte(`
profiles:
  default:
    network:
      allow: ["api.example.com", "*.", "http://h.example/v1/ G3T"]
      credentials: [{host: "api.example.com/x", header: "Bad Header", value: {env: K}}]
  plain: {}
egress: {allow: ["ftp://x/"]}
tenants:
  t: {agents: {a: {code_execution: {network: rules}}, b: {code_execution: {profile: plain, network: rules}}}}
`), "n.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"profiles.default.network.allow[1]", "profiles.default.network.allow[2]",
		"profiles.default.network.credentials[0].host", "profiles.default.network.credentials[0].header",
		"egress.allow[0]", "tenants.t.agents.b.code_execution.network"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "agents.a.code_execution.network") {
		t.Errorf("an agent of a profile with rules was refused: %v", err)
	}
	if _, err := Parse([]byte(`
profiles: {default: {network: {allow: ["*.example.com:8443"], credentials: [{host: "api.example.com", header: Authorization, value: {env: K}}], max_bytes: 1MiB}}}
tenants: {t: {agents: {a: {code_execution: {network: rules}}}}}
`), "ok.yaml"); err != nil {
		t.Errorf("a valid network block: %v", err)
	}
}

// An upstream's sandbox names a profile that can contain a command server.
func TestValidateUpstreamSandbox(t *testing.T) {
	_, err := Parse([]byte(`
profiles: {default: {}, far: {backend: remote, remote: {url: "https://s.example"}}}
upstreams:
  a: {command: [srv], sandbox: nowhere}
  b: {url: "https://x.example/mcp", sandbox: default}
  c: {command: [srv], sandbox: far}
  d: {command: [srv], sandbox: default}
tenants: {t: {upstreams: [a, b, c, d], agents: {x: {}}}}
`), "u.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"upstreams.a.sandbox", "upstreams.b.sandbox", "upstreams.c.sandbox"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "upstreams.d") {
		t.Errorf("a command upstream in a local profile was refused: %v", err)
	}
}

// A contained upstream's paths are absolute, clean, never the root or the kernel's trees,
// each listed once, and only on an upstream with sandbox:.
func TestValidateUpstreamPaths(t *testing.T) {
	_, err := Parse([]byte(`
profiles: {default: {}}
upstreams:
  a: {command: [srv], paths: {read_only: [/srv/data]}}
  b: {command: [srv], sandbox: default, paths: {read_only: [relative, /srv/../etc, /], read_write: [/proc/1, /sys]}}
  c: {command: [srv], sandbox: default, paths: {read_only: [/srv/x], read_write: [/srv/x]}}
  d: {command: [srv], sandbox: default, paths: {read_only: [/srv/data, /usr/share/dict], read_write: [/var/lib/d]}}
tenants: {t: {upstreams: [a, b, c, d], agents: {x: {}}}}
`), "u.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"upstreams.a.paths:", "upstreams.b.paths.read_only[0]", "upstreams.b.paths.read_only[1]",
		"upstreams.b.paths.read_only[2]", "upstreams.b.paths.read_write[0]", "upstreams.b.paths.read_write[1]",
		"upstreams.c.paths.read_write[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "upstreams.d") {
		t.Errorf("declared paths were refused: %v", err)
	}
}
