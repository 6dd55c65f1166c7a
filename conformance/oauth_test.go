package conformance

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// oidcIssuer starts oidc-issuer.mjs (oidc-provider) on 127.0.0.1 for resource, with one
// client-credentials client, and returns its issuer URL. It exits when its stdin closes.
func oidcIssuer(t *testing.T, resource, clientID, secret string) string {
	t.Helper()
	node := nodeFor(t, "oidc-provider", filepath.Join("node_modules", "oidc-provider", "package.json"))
	url, _ := nodeListener(t, "the issuer", node, "oidc-issuer.mjs", "OIDC_RESOURCE="+resource, "OIDC_SCOPE=mcp:run",
		"OIDC_CLIENT_ID="+clientID, "OIDC_CLIENT_SECRET="+secret)
	return url
}

// TestOAuthClientCredentialsRunCode: a real authorization server (oidc-provider) issues a
// client-credentials access token whose audience is the server's resource; go-sdk's client,
// with its OAuth support, finds the issuer from the 401's resource metadata, gets the token
// and runs run_code as the tenant the token's client_id maps to; the TypeScript SDK's client
// runs it with the same token.
func TestOAuthClientCredentialsRunCode(t *testing.T) {
	// The resource URI names the server's address, so the port is chosen before it starts.
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	resource := "http://" + addr + "/mcp"
	issuer := oidcIssuer(t, resource, "acme-runner", "acme-secret-123456")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: "-"
`+processProfile+`
auth:
  oauth:
    resource: %q
    issuers: [{issuer: %q}]
    tenant_claim: client_id
tenants:
  acme:
    oauth: {subjects: [acme-runner], scopes: ["mcp:run"]}
    agents:
      default: {code_execution: {}}
  zeta:
    tokens: [%q]
    agents:
      default: {code_execution: {}}
`, resource, issuer, configs.HashToken("zeta-static-token")))
	log := testkit.NewLog(t, "server")
	cmd := exec.Command(testkit.Binary(t), "serve", "--transport", "http", "--listen", addr, "--config", cfg)
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	interruptOnCleanup(t, cmd, done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not answer: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The resource metadata names the issuer; go-sdk's client accepts it for this resource.
	prm, err := oauthex.GetProtectedResourceMetadata(context.Background(), "http://"+addr+"/.well-known/oauth-protected-resource/mcp", resource, nil)
	if err != nil || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != issuer {
		t.Fatalf("resource metadata %+v, %v", prm, err)
	}

	handler, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: "acme-runner",
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: "acme-secret-123456"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "conformance-oauth", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: resource, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v\n%s", err, log)
	}
	defer cs.Close()
	var v int
	run(t, cs, "return 6 * 7", &v)
	if v != 42 {
		t.Fatalf("run_code returned %d", v)
	}
	ts, err := handler.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatalf("no token source: %v", err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}

	// The TypeScript SDK's client runs run_code with the same token as its bearer.
	node := nodeFor(t, "@modelcontextprotocol/sdk", filepath.Join("node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	js, err := ecoRun(t, time.Minute, "", os.Environ(), node, "clients/ts-client.mjs", "--url", resource, "--token", tok.AccessToken)
	if err != nil {
		t.Fatalf("ts-client: %v", err)
	}
	var r ecoClientReport
	ecoDecode(t, js, &r)
	ecoCheck42(t, r)
	// The server logs a run_code line as the call ends, possibly after the answer is out.
	var out string
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out = log.String()
		if strings.Count(out, "msg=run_code") >= 2 || time.Now().After(end) {
			break
		}
	}
	if n := strings.Count(out, "msg=run_code tenant=acme"); n != 2 || strings.Contains(out, "tenant=zeta") {
		t.Errorf("%d programs ran as tenant acme, want 2 (and none as zeta); log:\n%s", n, out)
	}
	if strings.Contains(out, tok.AccessToken) || strings.Contains(out, "acme-secret-123456") {
		t.Error("the server's log holds the access token or the client secret")
	}
}
