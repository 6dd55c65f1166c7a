package conformance

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// upstreamTokenTTL is the lifetime of the access tokens the authorization server issues in
// TestOAuthUpstreamClientCredentials: long enough for many calls on one token, short enough
// that the program outlives one.
const upstreamTokenTTL = 12

// whoami is what the mock's whoami tool says of the token a call came with.
type whoami struct {
	JTI      string  `json:"jti"`
	ClientID string  `json:"client_id"`
	Scope    string  `json:"scope"`
	Exp      int64   `json:"exp"`
	Seen     float64 `json:"seen"`
}

// TestOAuthUpstreamClientCredentials: a real authorization server (oidc-provider) issues
// client-credentials JWTs for the mock upstream's resource, and the mock admits only those
// (go-jose against the issuer's JWKS, no leeway on exp). A program run by the built binary
// calls the mock many times: one token serves many calls, it is replaced once it nears its
// expiry, and the authorization server is found by the upstream's resource metadata when no
// issuer is configured. A wrong client secret, an unreachable authorization server and an
// upstream that refuses even a fresh token are each reported as that upstream's problem, in
// words that name it. No token and no secret is in the result, the ledger, the blobs or the
// log.
func TestOAuthUpstreamClientCredentials(t *testing.T) {
	const clientID, secret = "upstream-caller", "upstream-secret-5c1d2e"
	port := freeLoopbackPort(t)
	resource := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	node := nodeFor(t, "oidc-provider", filepath.Join("node_modules", "oidc-provider", "package.json"))
	issuer, _ := nodeListener(t, "the issuer", node, "oidc-issuer.mjs", "OIDC_RESOURCE="+resource, "OIDC_SCOPE=orders:read",
		"OIDC_CLIENT_ID="+clientID, "OIDC_CLIENT_SECRET="+secret, fmt.Sprintf("OIDC_TTL=%d", upstreamTokenTTL))

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens")
	mock := exec.Command(built.mock, "--http", fmt.Sprintf("127.0.0.1:%d", port), "--oauth-issuer", issuer)
	mock.Env = append(os.Environ(), "MOCK_TOKEN_FILE="+tokenFile)
	startLogged(t, mock, "mock", regexp.MustCompile(`listening on (\S+)`), nil)
	// strict admits the same issuer's tokens for another audience only: every token is refused.
	strict := exec.Command(built.mock, "--http", "127.0.0.1:0", "--oauth-issuer", issuer, "--oauth-audience", "http://other.example/mcp")
	strictAddr := startLogged(t, strict, "strict", regexp.MustCompile(`listening on (\S+)`), nil)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCP_SANDBOX_TEST_UPSTREAM_SECRET", secret)
	t.Setenv("MCP_SANDBOX_TEST_WRONG_SECRET", "wrong-secret-9a8b7c")
	data := filepath.Join(dir, "data")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
`+processProfile+`    hard_limits: {wall_seconds: 120}
upstreams:
  orders:    {url: %q, oauth: {issuer: %q, client_id: %s, client_secret: {env: MCP_SANDBOX_TEST_UPSTREAM_SECRET}, scopes: ["orders:read"], resource: %q}}
  found:     {url: %q, oauth: {client_id: %s, client_secret: {file: %q}}}
  badsecret: {url: %q, oauth: {issuer: %q, client_id: %s, client_secret: {env: MCP_SANDBOX_TEST_WRONG_SECRET}}}
  noas:      {url: %q, oauth: {issuer: %q, client_id: %s, client_secret: {env: MCP_SANDBOX_TEST_UPSTREAM_SECRET}}}
  strict:    {url: %q, oauth: {issuer: %q, client_id: %s, client_secret: {env: MCP_SANDBOX_TEST_UPSTREAM_SECRET}, resource: %q}}
tenants:
  t:
    upstreams: [orders, found, badsecret, noas, strict]
    agents:
      default: {code_execution: {limits: {wall_seconds: 120}}}
`, data, resource, issuer, clientID, resource,
		resource, clientID, secretFile,
		resource, issuer, clientID,
		resource, closed, clientID,
		"http://"+strictAddr+"/mcp", issuer, clientID, resource))

	const program = `
import asyncio, time
seen = [await orders__whoami() for _ in range(12)]
# Wait until the first token has expired, then call again.
await asyncio.sleep(max(0, seen[0]["exp"] - time.time() + 1))
seen += [await orders__whoami() for _ in range(3)]
found = await found__whoami()
refused = {}
for name in ("badsecret__whoami", "noas__whoami", "strict__whoami"):
    try:
        await call_tool(name, {})
        refused[name] = "called"
    except ToolError as e:
        refused[name] = e.kind
return {"seen": seen, "found": found, "refused": refused}
`
	out, errOut, code := sandboxCLI(t, program, "run", "--config", cfg, "-")
	var res struct {
		Value struct {
			Seen    []whoami          `json:"seen"`
			Found   whoami            `json:"found"`
			Refused map[string]string `json:"refused"`
		} `json:"value"`
		Failure *struct {
			Kind, Message, Traceback string
		} `json:"failure"`
		Problems []struct {
			Server  string `json:"server"`
			Problem string `json:"problem"`
		} `json:"upstream_problems"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("exit %d, result %s: %v\nlog:\n%s", code, out, err, errOut)
	}
	if res.Failure != nil {
		t.Fatalf("program failed (%s): %s\n%s\nlog:\n%s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback, errOut)
	}
	seen := res.Value.Seen

	// Every call came with a token the mock verified, issued to our client for its scope.
	for _, w := range append(seen, res.Value.Found) {
		if w.ClientID != clientID || w.JTI == "" {
			t.Fatalf("a call came with %+v", w)
		}
	}
	if !strings.Contains(seen[0].Scope, "orders:read") {
		t.Errorf("the token's scope is %q, want orders:read", seen[0].Scope)
	}
	// One token serves many calls; a token is replaced only near its end (the margin, plus
	// the token request's round trip and exp's whole seconds, well within half its life).
	jtis := map[string]bool{}
	for i, w := range seen {
		jtis[w.JTI] = true
		if i > 0 && w.JTI != seen[i-1].JTI && w.Seen < float64(seen[i-1].Exp)-upstreamTokenTTL/2 {
			t.Errorf("call %d came with a new token %.1fs before the previous one expired", i, float64(seen[i-1].Exp)-w.Seen)
		}
	}
	t.Logf("%d calls of orders came with %d tokens over %.1fs", len(seen), len(jtis), seen[len(seen)-1].Seen-seen[0].Seen)
	if len(jtis) < 2 || len(jtis) > len(seen)/2 {
		t.Errorf("%d calls came with %d distinct tokens, want at least 2 (it expired) and many calls per token", len(seen), len(jtis))
	}
	if last := seen[len(seen)-1]; last.JTI == seen[0].JTI || last.Seen < float64(seen[0].Exp) {
		t.Errorf("after the first token expired a call came with %+v (first %+v)", last, seen[0])
	}

	// The failures are the upstreams' problems, each naming what went wrong.
	for name, want := range map[string]string{
		"badsecret": "refused the client (invalid_client)",
		"noas":      "its OAuth authorization server could not be reached",
		"strict":    "HTTP 401 after a renewal",
	} {
		var got string
		for _, p := range res.Problems {
			if p.Server == name {
				got = p.Problem
			}
		}
		if !strings.Contains(got, want) {
			t.Errorf("upstream_problems says of %s %q, want it to say %q (all: %+v)", name, got, want, res.Problems)
		}
		if k := res.Value.Refused[name+"__whoami"]; k != "unavailable" {
			t.Errorf("calling %s__whoami: %q, want ToolError unavailable", name, k)
		}
	}

	// No token and no secret anywhere the server writes.
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tokens := strings.Fields(string(raw))
	// orders' tokens, and found's: one, or two when the one it was listed with had expired
	// by the time the program called it.
	if len(tokens) < len(jtis)+1 || len(tokens) > len(jtis)+2 {
		t.Errorf("the mock admitted %d distinct tokens, want %d or %d", len(tokens), len(jtis)+1, len(jtis)+2)
	}
	secrets := append(tokens, secret, "wrong-secret-9a8b7c")
	where := map[string]string{"the result": out, "the log": errOut}
	filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(path)
			where[path] = string(b)
		}
		return nil
	})
	if len(where) < 3 {
		t.Fatalf("the data directory holds no file (no ledger?)")
	}
	for place, text := range where {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds a token or a secret", place)
			}
		}
	}
}
