//go:build linux

package namespaces_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
)

// tlsOrigin is an HTTPS server on 127.0.0.1 with a CA of its own, for any name it is asked
// for; it records the Authorization header of each request.
type tlsOrigin struct {
	port  int
	roots *x509.CertPool
	mu    sync.Mutex
	seen  map[string]string // path → Authorization
	conns int
}

func startOrigin(t *testing.T) *tlsOrigin {
	t.Helper()
	ca, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	o := &tlsOrigin{roots: x509.NewCertPool(), seen: map[string]string{}}
	o.roots.AddCert(ca.Certificate())
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.port = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o.mu.Lock()
			o.seen[r.URL.Path] = r.Header.Get("Authorization")
			o.mu.Unlock()
			fmt.Fprintf(w, "origin says hello to %s", r.URL.Path)
		}),
		TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			name := h.ServerName
			if name == "" {
				name = "127.0.0.1"
			}
			return ca.Leaf(name)
		}},
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				o.mu.Lock()
				o.conns++
				o.mu.Unlock()
			}
		},
	}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	return o
}

func (o *tlsOrigin) requests() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := map[string]string{}
	for k, v := range o.seen {
		m[k] = v
	}
	return m
}

const egressSecret = "Bearer sk-egress-7f3a9c1e5b"

// Issue 28, must show 1 and 2: a program under network rules reaches an allowed HTTPS origin
// through the host's proxy, by name and by its address, with urllib and with http.client; a
// name no rule allows, an address by number, another port, a mismatched SNI, names resolving
// to private and loopback addresses, and a raw socket are refused, the proxy's refusals
// listed in the result. The origin receives the credential header; the program finds no
// trace of it in its environment, /proc/self, its files or the proxy's answers, and neither
// the result nor the log holds it.
func TestEgressRulesAndCredential(t *testing.T) {
	o := startOrigin(t)
	rules, err := egress.ParseRules([]string{fmt.Sprintf("127.0.0.1:%d", o.port), fmt.Sprintf("*.example.test:%d", o.port)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pol := &egress.Policy{
		Rules:   rules,
		RootCAs: o.roots,
		// The test's resolver: no name is ever looked up in DNS, and the private addresses
		// below are refused before any packet is sent.
		Resolver: egress.Hosts{
			"api.example.test":     {lo},
			"other.test":           {lo},
			"private.example.test": {netip.MustParseAddr("10.9.8.7")},
			"loop.example.test":    {netip.MustParseAddr("127.0.0.2")},
		},
		Credentials: []egress.Credential{{Host: "api.example.test", Header: "Authorization",
			Value: func() (string, error) { return egressSecret, nil }}},
	}
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{}, engine.RunnerOptions{Egress: pol})
	port := fmt.Sprint(o.port)
	prog := strings.NewReplacer("PORT2", fmt.Sprint(o.port+1), "PORT", port).Replace(egressProgram)
	res := r.Run(context.Background(), engine.Execution{Program: prog, Logger: logger,
		Terms: engine.Terms{Isolation: engine.LevelIsolated, Network: engine.NetworkRules}})
	ok(t, res)
	t.Logf("value: %s\nnetwork: %+v", res.Value, res.Network)
	var out map[string]any
	if err := json.Unmarshal(res.Value, &out); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	for _, k := range []string{"api", "ip", "client"} {
		if s := fmt.Sprint(out[k]); !strings.Contains(s, "200") || !strings.Contains(s, "origin says hello") {
			t.Errorf("%s: %s, want the origin's answer", k, s)
		}
	}
	for _, k := range []string{"refused_name", "ip_literal", "other_port", "private", "loopback"} {
		if s := fmt.Sprint(out[k]); !strings.Contains(s, "403") {
			t.Errorf("%s: %s, want a 403 from the proxy", k, s)
		}
	}
	if out["sni"] != "refused" {
		t.Errorf("a TLS handshake naming another host than the CONNECT: %v", out["sni"])
	}
	if s := fmt.Sprint(out["raw"]); !strings.HasPrefix(s, "refused") {
		t.Errorf("a raw socket to the origin's address: %s", s)
	}
	if out["secret_found"] != false {
		t.Errorf("the program found the secret: %v", out["secret_found"])
	}
	seen := o.requests()
	if seen["/data"] != egressSecret || seen["/client"] != egressSecret {
		t.Errorf("the origin saw Authorization %q, want the credential on api.example.test's requests", seen)
	}
	if a, ok := seen["/ip"]; !ok || a != "" {
		t.Errorf("the request by address: seen %v, Authorization %q (no credential rule names it)", ok, a)
	}
	if len(seen) != 3 {
		t.Errorf("the origin served %v, want only the allowed requests", seen)
	}
	if res.Network == nil {
		t.Fatal("no network block in the result")
	}
	want := map[egress.Refusal]bool{
		{Host: "other.test", Port: o.port, Reason: egress.ReasonNotAllowed}:               true,
		{Host: "127.0.0.2", Port: o.port, Reason: egress.ReasonIPLiteral}:                 true,
		{Host: "api.example.test", Port: o.port + 1, Reason: egress.ReasonNotAllowed}:     true,
		{Host: "private.example.test", Port: o.port, Reason: egress.ReasonPrivateAddress}: true,
		{Host: "loop.example.test", Port: o.port, Reason: egress.ReasonPrivateAddress}:    true,
		{Host: "api.example.test", Port: o.port, Reason: egress.ReasonSNIMismatch}:        true,
	}
	for _, ref := range res.Network.Refused {
		if !want[ref] {
			t.Errorf("unexpected refusal %+v", ref)
		}
		delete(want, ref)
	}
	for ref := range want {
		t.Errorf("refusal %+v is not in the result's network block %+v", ref, res.Network)
	}
	if res.Network.Allowed != 3 || res.Network.BytesIn == 0 || res.Network.BytesOut == 0 {
		t.Errorf("network %+v: want 3 allowed and bytes both ways", res.Network)
	}
	doc, _ := json.Marshal(res)
	secretBare := strings.TrimPrefix(egressSecret, "Bearer ")
	if bytes.Contains(doc, []byte(secretBare)) || strings.Contains(logs.String(), secretBare) {
		t.Error("the secret is in the result or the log")
	}
	if !strings.Contains(logs.String(), "egress refused") {
		t.Errorf("the log has no refusal line:\n%s", logs.String())
	}
	if g := res.Guarantees.Get(engine.DimNetwork); g != engine.Enforced {
		t.Errorf("network graded %s under rules, want enforced", g)
	}
}

// Network rules on a profile without any, or on a backend that cannot confine them, are
// refused before anything runs.
func TestEgressRulesRefusedWithoutPolicy(t *testing.T) {
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{}, engine.RunnerOptions{})
	res := r.Run(context.Background(), engine.Execution{Program: "1",
		Terms: engine.Terms{Isolation: engine.LevelIsolated, Network: engine.NetworkRules}})
	if res.Failure == nil || res.Failure.Kind != "network_unavailable" || res.Failure.Executed {
		t.Fatalf("failure %+v, want network_unavailable before running", res.Failure)
	}
}

const egressProgram = `
import urllib.request, urllib.error, http.client, os, socket, ssl, json
out = {}
answers = []
def get(u):
    try:
        with urllib.request.urlopen(u, timeout=120) as r:
            body = r.read().decode()
            answers.append(body)
            return [r.status, body]
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        answers.append(body)
        return [e.code, body]
    except Exception as e:
        answers.append(repr(e))
        return ["error", repr(e)]
out["api"] = get("https://api.example.test:PORT/data")
out["ip"] = get("https://127.0.0.1:PORT/ip")
out["refused_name"] = get("https://other.test:PORT/")
out["ip_literal"] = get("https://127.0.0.2:PORT/")
out["other_port"] = get("https://api.example.test:PORT2/")
out["private"] = get("https://private.example.test:PORT/")
out["loopback"] = get("https://loop.example.test:PORT/")
c = http.client.HTTPSConnection("127.0.0.1", 3128, context=ssl.create_default_context(), timeout=120)
c.set_tunnel("api.example.test", PORT)
c.request("GET", "/client")
r = c.getresponse()
out["client"] = [r.status, r.read().decode()]
c.close()
s = socket.create_connection(("127.0.0.1", 3128), timeout=120)
s.sendall(b"CONNECT api.example.test:PORT HTTP/1.1\r\nHost: api.example.test:PORT\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(1)
    if not chunk:
        break
    head += chunk
answers.append(head.decode(errors="replace"))
try:
    ssl.create_default_context().wrap_socket(s, server_hostname="evil.example.test")
    out["sni"] = "connected"
except (ssl.SSLError, OSError):
    out["sni"] = "refused"
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=120).close()
    out["raw"] = "connected"
except OSError as e:
    out["raw"] = "refused: " + type(e).__name__
hay = [json.dumps(dict(os.environ)), "\n".join(answers)]
for p in ["/proc/self/environ", "/proc/self/cmdline", "/proc/self/status", "/proc/self/mountinfo"]:
    try:
        hay.append(open(p, "rb").read().decode(errors="replace"))
    except OSError:
        pass
for top in ["/etc", os.getcwd(), "/tmp", os.path.expanduser("~")]:
    for root, dirs, files in os.walk(top):
        for f in files:
            try:
                with open(os.path.join(root, f), "rb") as fh:
                    hay.append(fh.read(1 << 20).decode(errors="replace"))
            except OSError:
                pass
out["secret_found"] = any("sk-egress" in h for h in hay)
out
`
