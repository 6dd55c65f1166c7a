package assembly

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// The bearer reference is resolved at every request, so a rotated secret takes effect at once.
func TestUpstreamBearerResolvedPerRequest(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("one\n"), 0o600)
	s := testEnv.upstreamServer("docs", configs.Upstream{URL: "https://docs.example/mcp", Bearer: &configs.Credential{File: file}})
	for _, want := range []string{"one", "two"} {
		if want == "two" {
			os.WriteFile(file, []byte("two"), 0o600)
		}
		got, err := s.Bearer(context.Background())
		if err != nil || got != want {
			t.Errorf("Bearer = %q, %v; want %q", got, err, want)
		}
	}
	t.Setenv("MCP_SANDBOX_TEST_TOKEN", "env-secret")
	s = testEnv.upstreamServer("docs", configs.Upstream{URL: "https://docs.example/mcp", Bearer: &configs.Credential{Env: "MCP_SANDBOX_TEST_TOKEN"}})
	if got, err := s.Bearer(context.Background()); err != nil || got != "env-secret" {
		t.Errorf("Bearer = %q, %v", got, err)
	}
}

// An agent's upstream view carries the tenant policy; built-ins in a bindings list are
// dropped (always callable), upstream names and globs kept; an ungranted tenant gets nil.
func TestAgentUpstreams(t *testing.T) {
	bindings := []string{"list_tools", "docs__*", "support__lookup"}
	cfg := testConfig(&configs.Config{
		Upstreams: map[string]configs.Upstream{"docs": {Command: []string{"/bin/true"}}},
		Tenants: map[string]configs.Tenant{
			"t":    {Upstreams: []string{"docs"}, Policy: configs.Policy{Deny: []string{"docs__x"}, ApprovalRequired: []string{"docs__y*"}}, Agents: map[string]configs.Agent{"a": {ExposeUpstreamTools: true, CodeExecution: &configs.CodeExecution{Bindings: &bindings}}}},
			"none": {Agents: map[string]configs.Agent{"a": {}}},
		},
	})
	tp, err := openUpstreams(cfg, []string{"t", "none"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.close()
	u := tp.agentUpstreams(cfg, "t", "a")
	if u == nil || !u.Expose || u.Catalogue == nil {
		t.Fatalf("agentUpstreams = %+v", u)
	}
	if d := cmp.Diff([]string{"docs__*", "support__lookup"}, *u.Bindings); d != "" {
		t.Errorf("bindings (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"docs__x"}, u.Deny); d != "" {
		t.Errorf("deny: %s", d)
	}
	if d := cmp.Diff([]string{"docs__y*"}, u.ApprovalRequired); d != "" {
		t.Errorf("approval: %s", d)
	}
	if tp.agentUpstreams(cfg, "none", "a") != nil {
		t.Errorf("a tenant granted nothing has upstreams")
	}
	cfg.Tenants["bad"] = configs.Tenant{Upstreams: []string{"missing"}}
	if _, err := openUpstreams(cfg, []string{"bad"}, nil); err == nil {
		t.Errorf("a grant of an undefined upstream was accepted")
	}
}

// An A2A peer takes its url, bearer and allow_insecure_http from its a2a block.
func TestUpstreamA2APeer(t *testing.T) {
	t.Setenv("MCP_SANDBOX_TEST_TOKEN", "peer-secret")
	s := testEnv.upstreamServer("inv", configs.Upstream{Deferred: true, A2A: &configs.A2APeer{
		URL: "http://agents.example/inv", AllowInsecureHTTP: true, Bearer: &configs.Credential{Env: "MCP_SANDBOX_TEST_TOKEN"},
	}})
	if !s.A2A || s.URL != "http://agents.example/inv" || !s.AllowInsecureHTTP || !s.Deferred || s.Bearer == nil {
		t.Fatalf("server = %+v", s)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Bearer(context.Background()); err != nil || got != "peer-secret" {
		t.Errorf("Bearer = %q, %v", got, err)
	}
}

// A credential that cannot be resolved carries a reason the model may read: the variable's
// name and what is wrong with it, never a value or a file's path.
func TestBearerReasonNamesTheVariable(t *testing.T) {
	const name = "MCP_SANDBOX_TEST_UNSET_TOKEN"
	t.Setenv(name, "")
	os.Unsetenv(name)
	for _, tt := range []struct {
		cred configs.Credential
		set  *string
		want string
	}{
		{configs.Credential{Env: name}, nil, "the environment variable " + name + " is not set"},
		{configs.Credential{Env: name}, new(""), "the environment variable " + name + " is empty"},
		{configs.Credential{File: "/nonexistent/secret/token"}, nil, "its credential file could not be read"},
	} {
		if tt.set != nil {
			t.Setenv(name, *tt.set)
		}
		_, err := testEnv.bearerOf(&tt.cred)(context.Background())
		var ce *upstream.CredentialError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Reason, tt.want) || strings.Contains(ce.Reason, "/nonexistent") {
			t.Errorf("%v: %v, want a CredentialError saying %q (and no path)", tt.cred, err, tt.want)
		}
	}
}
