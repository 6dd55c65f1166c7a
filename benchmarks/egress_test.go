//go:build linux

package benchmarks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/egress/egresstest"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestReportEgress prints what a program's 100 sequential HTTPS GETs of 1 KiB (urllib, a
// connection each) cost through the egress proxy under network rules, beside the same GETs
// made directly with network unrestricted, in the namespaces backend, executions alternating
// so both see the same machine. The origin listens on 127.0.0.1 with a CA of its own; the
// program times its loop itself, so the figure is the requests' and not the child's start.
func TestReportEgress(t *testing.T) {
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, "the egress proxy needs the namespaces backend: "+why)
	ctx := context.Background()
	kib := bytes.Repeat([]byte("x"), 1024)
	origin := egresstest.NewOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(kib) }))
	ca, port := origin.CA, origin.Port
	nb, err := namespaces.New(ctx, &namespaces.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.NewRunner(nb, &engine.RunnerOptions{AllowSameUID: os.Geteuid() != 0, AllowNetwork: true,
		Egress: &egress.Policy{Rules: origin.Rules(t), RootCAs: origin.Roots()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	caPEM, _ := json.Marshal(string(ca.PEM()))
	prog := func(direct bool) string {
		ctxLine := "ctx = ssl.create_default_context()  # the execution's CA, through SSL_CERT_FILE"
		if direct {
			ctxLine = "open('ca.pem', 'w').write(" + string(caPEM) + ")\nctx = ssl.create_default_context(cafile='ca.pem')"
		}
		return "import ssl, time, urllib.request\n" + ctxLine + fmt.Sprintf(`
url = "https://127.0.0.1:%d/kib"
assert len(urllib.request.urlopen(url, context=ctx).read()) == 1024  # warm the imports
t0 = time.perf_counter()
for _ in range(100):
    assert len(urllib.request.urlopen(url, context=ctx).read()) == 1024
time.perf_counter() - t0
`, port)
	}
	type subject struct {
		name    string
		network engine.Network
		direct  bool
		per     []time.Duration
	}
	subjects := []*subject{
		{name: "direct (network unrestricted)", network: engine.NetworkUnrestricted, direct: true},
		{name: "through the egress proxy (network rules)", network: engine.NetworkRules},
	}
	n := 3
	if *report {
		n = 15
	}
	for i := 0; i < n; i++ {
		for _, s := range subjects {
			res := r.Run(ctx, engine.Execution{Program: prog(s.direct),
				Terms: engine.Terms{Isolation: engine.LevelProcess, Network: s.network, Limits: engine.Limits{WallSeconds: 120, CPUSeconds: 60}}})
			if res.Failure != nil {
				t.Fatalf("%s: %s: %s\n%s", s.name, res.Failure.Kind, res.Failure.Message, res.Failure.Traceback)
			}
			var secs float64
			if err := json.Unmarshal(res.Value, &secs); err != nil {
				t.Fatalf("%s: value %s", s.name, res.Value)
			}
			s.per = append(s.per, time.Duration(secs*float64(time.Second)/100))
			if s.network == engine.NetworkRules && (res.Network == nil || res.Network.Allowed != 101) {
				t.Fatalf("%s: network %+v, want 101 requests allowed", s.name, res.Network)
			}
		}
	}
	var lines []string
	for _, s := range subjects {
		lines = append(lines, fmt.Sprintf("  %-42s median %v a GET", s.name, median(s.per).Round(10*time.Microsecond)))
	}
	t.Logf("100 sequential HTTPS GETs of 1 KiB, %d executions each (load %s):\n%s\n  ratio %.2f×", n, loadAverage(),
		strings.Join(lines, "\n"), float64(median(subjects[1].per))/float64(median(subjects[0].per)))
}
