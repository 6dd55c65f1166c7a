package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// narrowScope is an OAuth access token that lacks the tenant's scope.
type narrowScope struct{}

func (narrowScope) Error() string           { return "token refused: it lacks scope s" }
func (narrowScope) InsufficientScope() bool { return true }

// TestAdmitsIsTheHandlersDecision: what HTTPOptions.Admits says of a request is what
// HTTPHandler does with it (let through, or answer 401 or 403), for every kind of credential,
// so the listener's guard needs no copy of the decision; an operator's token is admitted too.
func TestAdmitsIsTheHandlersDecision(t *testing.T) {
	tokenless := ""
	opts := &HTTPOptions{
		Agents:       []Agent{{Tenant: "a", Name: "default"}},
		Authenticate: func(tok string) (string, bool) { return "a", tok == "ta" },
		Tokenless:    func() string { return tokenless },
		Operator:     func(tok string) bool { return tok == "op" },
		OAuth: &OAuth{Verify: func(_ context.Context, tok string) (string, error) {
			switch tok {
			case "jwt":
				return "a", nil
			case "narrow":
				return "", narrowScope{}
			}
			return "", errors.New("token refused: not a JWT")
		}},
		Server: &Options{Logger: discard(), Drain: drainAtCleanup(t)},
		Logger: discard(),
	}
	srv := httptest.NewServer(HTTPHandler(opts))
	defer srv.Close()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`
	for _, c := range []struct {
		name, auth, tokenless string
		want                  bool
	}{
		{"no header, no tokenless tenant", "", "", false},
		{"no header, a tokenless tenant", "", "a", true},
		{"a tenant's token", "Bearer ta", "", true},
		{"a tenant's token while tokenless", "Bearer ta", "a", true},
		{"an unknown token, even while tokenless", "Bearer zz", "a", false},
		{"an OAuth access token", "Bearer jwt", "", true},
		{"an access token without the scope", "Bearer narrow", "", false},
		{"another scheme", "Basic dGE6", "", false},
		{"an empty bearer", "Bearer ", "", false},
	} {
		tokenless = c.tokenless
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if got := opts.Admits(req); got != c.want {
			t.Errorf("%s: Admits %v, want %v", c.name, got, c.want)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if through := resp.StatusCode != 401 && resp.StatusCode != 403; through != c.want {
			t.Errorf("%s: the handler answered %d, Admits says %v", c.name, resp.StatusCode, c.want)
		}
	}
	op, _ := http.NewRequest("GET", srv.URL+"/v1/approvals", nil)
	op.Header.Set("Authorization", "Bearer op")
	if !opts.Admits(op) {
		t.Error("an operator's token is not admitted")
	}
}
