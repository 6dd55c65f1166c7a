package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// tokenServer is an authorization server on loopback that issues a token to client "caller"
// with secret "caller-secret-31f", and answers invalid_client to anyone else.
func tokenServer(t *testing.T) string {
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "token_endpoint": srv.URL + "/token",
			"code_challenge_methods_supported": []string{"S256"}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if id, secret, ok := r.BasicAuth(); !ok || id != "caller" || secret != "caller-secret-31f" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"issued-tok-77","token_type":"Bearer","expires_in":60}`)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCheckSaysHowUpstreamsAuthenticate: check names, per upstream, how the server
// authenticates to it; for an OAuth upstream it asks the authorization server for a token, and
// a wrong secret, an unset secret and an unreachable server are warnings that name the
// problem, with exit status 0 (the config is valid). doctor --json carries the same.
func TestCheckSaysHowUpstreamsAuthenticate(t *testing.T) {
	issuer := tokenServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv("MCP_SANDBOX_TEST_GOOD", "caller-secret-31f")
	t.Setenv("MCP_SANDBOX_TEST_BAD", "not-the-secret-4e")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: "-"
upstreams:
  local: {command: [/bin/true]}
  docs:  {url: https://docs.example/mcp, bearer: {env: DOCS_TOKEN}}
  open:  {url: https://open.example/mcp}
  good:  {url: https://crm.example/mcp, oauth: {issuer: %q, client_id: caller, client_secret: {env: MCP_SANDBOX_TEST_GOOD}, scopes: [crm.read]}}
  wrong: {url: https://crm.example/mcp, oauth: {issuer: %q, client_id: caller, client_secret: {env: MCP_SANDBOX_TEST_BAD}}}
  unset: {url: https://crm.example/mcp, oauth: {issuer: %q, client_id: caller, client_secret: {env: MCP_SANDBOX_TEST_UNSET_77}}}
  gone:  {url: https://crm.example/mcp, oauth: {issuer: %q, client_id: caller, client_secret: {env: MCP_SANDBOX_TEST_GOOD}}}
tenants:
  t: {upstreams: [local], agents: {default: {}}}
`, issuer, issuer, issuer, closed))
	out, errOut, code := runCLI(t, "", "check", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"upstream local       a local command: no credential",
		"upstream docs        a static bearer from env DOCS_TOKEN",
		"upstream open        no credential",
		"upstream good        OAuth client credentials: client caller at " + issuer + ", secret from env MCP_SANDBOX_TEST_GOOD, scopes crm.read: a token was obtained",
		"upstream wrong       OAuth client credentials: client caller at " + issuer + ", secret from env MCP_SANDBOX_TEST_BAD: NO TOKEN: its OAuth authorization server refused the client (invalid_client)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"warning: upstreams.wrong.oauth: no access token could be had: its OAuth authorization server refused the client (invalid_client)",
		"warning: upstreams.unset.oauth: no access token could be had: the environment variable MCP_SANDBOX_TEST_UNSET_77 is not set",
		"warning: upstreams.gone.oauth: no access token could be had: its OAuth authorization server could not be reached",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("check's warnings lack %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out+errOut, "issued-tok-77") || strings.Contains(out+errOut, "caller-secret-31f") || strings.Contains(out+errOut, "not-the-secret-4e") {
		t.Errorf("check printed a token or a secret:\n%s\n%s", out, errOut)
	}

	js, errOut, _ := runCLI(t, "", "doctor", "--json", "--config", cfg)
	var doc struct { // what doctor --json says of an upstream's authentication
		UpstreamAuth map[string]struct {
			Kind   string `json:"kind"`
			Bearer string `json:"bearer"`
			OAuth  *struct {
				Token        string `json:"token"`
				ClientSecret string `json:"client_secret"`
			} `json:"oauth"`
		} `json:"upstream_auth"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, js, errOut)
	}
	if a := doc.UpstreamAuth["good"]; a.Kind != "oauth" || a.OAuth == nil || a.OAuth.Token != "obtained" || a.OAuth.ClientSecret != "env MCP_SANDBOX_TEST_GOOD" {
		t.Errorf("doctor's upstream_auth.good = %+v", a)
	}
	if a := doc.UpstreamAuth["docs"]; a.Kind != "bearer" || a.Bearer != "env DOCS_TOKEN" {
		t.Errorf("doctor's upstream_auth.docs = %+v", a)
	}
}
