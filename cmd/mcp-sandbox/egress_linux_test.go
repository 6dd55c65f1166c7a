//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// `run` under a profile's network rules, end to end: the program reaches the allowed origin
// through the proxy by plain HTTP, a name and an address no rule allows are refused with a
// 403 it can read, and the result's network block lists them.
func TestRunNetworkRules(t *testing.T) {
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, why)
	var hits atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "plain hello %s", r.URL.Path)
	}))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "http://")
	port := host[strings.LastIndexByte(host, ':')+1:]
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles: {default: {backend: namespaces, isolation: isolated, network: {allow: ["%s", "http://docs.example.test:%s/v1/ GET"]}}}
tenants: {local: {agents: {default: {code_execution: {isolation: isolated, network: rules}}}}}
`, host, port))
	prog := fmt.Sprintf(`
import urllib.request, urllib.error
def get(u):
    try:
        return urllib.request.urlopen(u, timeout=120).read().decode()
    except urllib.error.HTTPError as e:
        return "%%d %%s" %% (e.code, e.read().decode())
[get("http://%s/ok"), get("http://other.example.test:%s/"), get("http://127.0.0.2:%s/")]
`, host, port, port)
	out, errOut, code := runCLI(t, prog, "run", "--config", cfg, "-")
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var res struct {
		Value   []string `json:"value"`
		Network *struct {
			Allowed int `json:"allowed"`
			Refused []struct {
				Host   string `json:"host"`
				Reason string `json:"reason"`
			} `json:"refused"`
		} `json:"network"`
		Terms struct {
			Network string `json:"network"`
		} `json:"terms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Value) != 3 || res.Value[0] != "plain hello /ok" ||
		!strings.HasPrefix(res.Value[1], "403 ") || !strings.Contains(res.Value[1], "not_allowed") ||
		!strings.HasPrefix(res.Value[2], "403 ") || !strings.Contains(res.Value[2], "ip_literal") {
		t.Errorf("value %q", res.Value)
	}
	if res.Terms.Network != "rules" || res.Network == nil || res.Network.Allowed != 1 || len(res.Network.Refused) != 2 ||
		res.Network.Refused[0].Host != "other.example.test" || res.Network.Refused[1].Reason != "ip_literal" {
		t.Errorf("terms.network %q, network %+v", res.Terms.Network, res.Network)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the origin was reached %d times, want once", n)
	}
}
