//go:build linux

package bwrap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/egress/egresstest"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// Under network rules bwrap keeps the network namespace the init helper was started in, whose
// one route out is the egress proxy: an allowed HTTPS origin answers, an address no rule names
// is refused by the proxy, and a raw socket finds nothing.
func TestEgressRules(t *testing.T) {
	requireBwrap(t, &bwrap.Options{})
	gate.Require(t, "root", os.Geteuid() == 0, "bwrap confines network by rules only as root")
	origin := egresstest.NewOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls hello %s", r.URL.Path)
	}))
	port := origin.Port
	b, err := bwrap.New(context.Background(), &bwrap.Options{})
	r := sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Isolation: engine.LevelIsolated,
		Egress: &egress.Policy{Rules: origin.Rules(t), RootCAs: origin.Roots()}})
	prog := strings.ReplaceAll(`
import urllib.request, urllib.error, socket
def get(u):
    try:
        return urllib.request.urlopen(u, timeout=120).read().decode()
    except Exception as e:
        return repr(e)
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=120).close()
    raw = "connected"
except OSError as e:
    raw = "refused"
[get("https://127.0.0.1:PORT/ok"), get("https://127.0.0.2:PORT/"), raw]
`, "PORT", fmt.Sprint(port))
	res := r.Run(context.Background(), engine.Execution{Program: prog,
		Terms: engine.Terms{Isolation: engine.LevelIsolated, Network: engine.NetworkRules}})
	if res.Failure != nil {
		t.Fatalf("%s: %s\n%s\n%s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback, res.Stderr)
	}
	var got []string
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 3 {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if got[0] != "tls hello /ok" || !strings.Contains(got[1], "403") || !strings.Contains(got[1], "ip_literal") || got[2] != "refused" {
		t.Errorf("value %q", got)
	}
	if res.Network == nil || res.Network.Allowed != 1 || len(res.Network.Refused) != 1 {
		t.Errorf("network %+v", res.Network)
	}
	if g := res.Guarantees.Get(engine.DimNetwork); g != engine.Enforced {
		t.Errorf("network graded %s", g)
	}
}
