package configs

import (
	"path/filepath"
	"testing"
)

// A remote profile and the sandbox_service block, each problem naming its key and line.
func TestRemoteProblems(t *testing.T) {
	checkProblems(t, "t.yaml", []problemCase{
		{
			name: "a remote profile and a service config are valid",
			data: doc(
				"profiles:",
				"  far:",
				"    backend: remote",
				"    isolation: isolated",
				"    remote: {url: \"https://sandboxes.internal:8443\", bearer: {env: SANDBOX_TOKEN}, allow_insecure_http: false}",
				"  near: {backend: remote, remote: {url: \"http://127.0.0.1:9000\", bearer: {file: token}}}",
				"  plain: {backend: remote, remote: {url: \"http://10.0.0.2:9000\", bearer: {env: T}, allow_insecure_http: true}}",
				"  open: {backend: remote, remote: {url: \"http://10.0.0.2:9000\"}}",
				"  default: {backend: local}",
				"sandbox_service: {tokens: [\"sha256:"+hex64+"\"], profile: default}",
				"tenants: {t: {agents: {a: {code_execution: {profile: far}}}}}",
			),
		},
		{
			name: "a service config needs no tenant",
			data: doc("sandbox_service: {tokens: []}", "profiles: {default: {}}"),
		},
		{
			name: "remote profiles",
			data: doc(
				"profiles:",
				"  none: {backend: remote}",
				"  nourl: {backend: remote, remote: {bearer: {env: T}}}",
				"  plain: {backend: remote, remote: {url: \"http://sandboxes.internal:8080\", bearer: {env: T}}}",
				"  creds: {backend: remote, remote: {url: \"https://u:p@sandboxes.internal\"}}",
				"  ftp: {backend: remote, remote: {url: \"ftp://sandboxes.internal\"}}",
				"  both: {backend: remote, remote: {url: \"https://s.internal\", bearer: {env: T, file: f}}}",
				"  local: {backend: remote, python: /usr/bin/python3, env_allowlist: [LANG], allow_same_uid: true, remote: {url: \"https://s.internal\"}}",
				"  stray: {backend: namespaces, remote: {url: \"https://s.internal\"}}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{
				`t.yaml:2: profiles.none.remote: backend "remote" needs a remote block: {url: "https://host:port", bearer: {env: NAME}}`,
				`t.yaml:3: profiles.nourl.remote.url: the sandbox service's URL is required`,
				`t.yaml:4: profiles.plain.remote.bearer: a credential is refused over plaintext http to a non-loopback host; use https, or set allow_insecure_http: true if the network in between is trusted`,
				`t.yaml:5: profiles.creds.remote.url: the URL carries credentials; put them in bearer (a reference) instead`,
				`t.yaml:6: profiles.ftp.remote.url: the scheme must be http or https`,
				`t.yaml:7: profiles.both.remote.bearer: set exactly one of env or file`,
				`t.yaml:8: profiles.local.python: applies to local backends; a remote profile runs on the sandbox service's own profile`,
				`t.yaml:8: profiles.local.env_allowlist: applies to local backends; a remote profile runs on the sandbox service's own profile`,
				`t.yaml:8: profiles.local.allow_same_uid: applies to local backends; a remote profile runs on the sandbox service's own profile`,
				`t.yaml:9: profiles.stray.remote: applies only to backend "remote"`,
			},
		},
		{
			name: "the sandbox service",
			data: doc(
				"profiles:",
				"  far: {backend: remote, remote: {url: \"https://s.internal\"}}",
				"sandbox_service:",
				"  tokens: [\"the-token-itself\", \"sha256:"+hex64+"\", \"sha256:"+hex64+"\"]",
				"  profile: far",
			),
			want: []string{
				`t.yaml:4: sandbox_service.tokens[0]: must be "sha256:" followed by 64 lowercase hex digits (the SHA-256 of the token, never the token)`,
				`t.yaml:4: sandbox_service.tokens[2]: token listed twice`,
				`t.yaml:5: sandbox_service.profile: profile "far" is remote; a sandbox service runs programs on a local backend`,
			},
		},
		{
			name: "the sandbox service's profile must exist",
			data: doc("sandbox_service: {profile: heavy}", "profiles: {light: {}}"),
			want: []string{`t.yaml:1: sandbox_service.profile: unknown profile "heavy" (defined: light)`},
		},
		{
			name: "unknown keys",
			data: doc("profiles: {far: {backend: remote, remote: {url: \"https://s.internal\", token: x}}}", "sandbox_service: {listen: x}"),
			want: []string{
				`t.yaml:1: profiles.far.remote.token: unknown key`,
				`t.yaml:2: sandbox_service.listen: unknown key`,
			},
		},
	})
}

const hex64 = "0b36bc3241c198bd6e2ca4d0fe4c390a89b31fdde7fc287bd7a4617df307090f"

// A remote profile's bearer file is taken against the config's directory, as an upstream's.
func TestLoadResolvesRemoteBearer(t *testing.T) {
	dir := writeFiles(t, map[string]string{"etc/c.yaml": string(doc(
		"profiles: {far: {backend: remote, remote: {url: \"https://s.internal\", bearer: {file: secrets/token}}}}",
		"tenants: {t: {agents: {a: {}}}}",
	))})
	c, err := Load(filepath.Join(dir, "etc", "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Profiles["far"].Remote.Bearer.File, filepath.Join(dir, "etc", "secrets/token"); got != want {
		t.Errorf("bearer file %q, want %q", got, want)
	}
}

// Where a remote profile's service listens does not change the agent's version.
func TestAgentVersionIgnoresTheServiceAddress(t *testing.T) {
	versionOf := func(url string) string {
		c, err := Parse(doc("profiles: {far: {backend: remote, remote: {url: \""+url+"\"}}}",
			"tenants: {t: {agents: {a: {code_execution: {profile: far}}}}}"), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.AgentVersion("t", "a")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if a, b := versionOf("https://one.internal"), versionOf("https://two.internal"); a != b {
		t.Errorf("versions differ: %s and %s", a, b)
	}
}
