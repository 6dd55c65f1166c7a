package configs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every example config, and the MCP Bundle's, loads and validates; examples/tenants/ is the
// tenants_dir of platform.yaml, and each of its files loads on its own too.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d examples, want at least claude-desktop, multi-tenant and platform", len(files))
	}
	// The MCP Bundle's configuration (make bundle) is one more.
	files = append(files, filepath.Join("..", "deploy", "mcpb", "config.yaml"))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			// Every agent has a version, so every agent names a real profile.
			for tn, tenant := range c.Tenants {
				for an := range tenant.Agents {
					if _, err := c.AgentVersion(tn, an); err != nil {
						t.Errorf("AgentVersion(%s, %s): %v", tn, an, err)
					}
				}
			}
			// Parse without the file's directory agrees except for tenants_dir content.
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(data, f); err != nil && c.TenantsDir == "" {
				t.Errorf("Parse: %v", err)
			}
		})
	}

	c, err := Load(filepath.Join("examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Tenants["acme"]; !ok {
		t.Error("platform.yaml did not pick up examples/tenants/acme.yaml")
	}
	tenants, err := LoadTenantsDir(filepath.Join("examples", "tenants"))
	if err != nil || len(tenants) == 0 {
		t.Errorf("LoadTenantsDir(examples/tenants) = %d tenants, %v", len(tenants), err)
	}

	// multi-tenant.yaml shows what the brief of each example promises.
	m, err := Load(filepath.Join("examples", "multi-tenant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	isolated := 0
	for _, p := range m.Profiles {
		if p.Isolation == IsolationIsolated {
			isolated++
		}
	}
	deferred, bearer, peer := false, false, false
	for _, u := range m.Upstreams {
		deferred = deferred || u.Deferred
		bearer = bearer || u.Bearer != nil && u.Bearer.Env != ""
		peer = peer || u.A2A != nil && u.A2A.Bearer != nil
	}
	if len(m.Tenants) < 2 || len(m.Profiles) < 2 || isolated == 0 || !deferred || !bearer || !peer {
		t.Errorf("multi-tenant.yaml: %d tenants, %d profiles (%d isolated), deferred %v, bearer env %v, a2a peer %v",
			len(m.Tenants), len(m.Profiles), isolated, deferred, bearer, peer)
	}
}

// Every token hash in an example comes with its example secret in a comment on its line, so
// the example can be tried as shipped (issue 23: the multi-tenant example's tokens were
// hashes of secrets given nowhere).
func TestExampleTokensAreGiven(t *testing.T) {
	hash := regexp.MustCompile(`sha256:([0-9a-f]{64})`)
	given := regexp.MustCompile(`sha256:[0-9a-f]{64}\]?\s*#\s*([A-Za-z0-9._-]+)`)
	files, _ := filepath.Glob(filepath.Join("examples", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join("examples", "*", "*.yaml"))
	n := 0
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			h := hash.FindStringSubmatch(line)
			if h == nil {
				continue
			}
			n++
			g := given.FindStringSubmatch(line)
			if g == nil {
				t.Errorf("%s:%d: a token hash without its example secret in a comment", f, i+1)
				continue
			}
			if HashToken(g[1]) != "sha256:"+h[1] {
				t.Errorf("%s:%d: %q is not the secret of %s", f, i+1, g[1], h[0])
			}
		}
	}
	if n < 3 {
		t.Errorf("found %d token hashes in the examples, want the multi-tenant example's three at least", n)
	}
}
