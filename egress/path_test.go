package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestCleanPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "/"},
		{"/", "/"},
		{"/v1/", "/v1/"},
		{"/v1/x", "/v1/x"},
		{"/v1/%61dmin", "/v1/admin"},
		{"/v1/a%20b", "/v1/a b"},
		{"/v1/a+b", "/v1/a+b"},
		{"/v1/...", "/v1/..."},
		{"/v1/.well-known", "/v1/.well-known"},
	} {
		if got, err := CleanPath(c.in); err != nil || got != c.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"/v1/../admin", "/v1/%2e%2e/admin", "/v1/%2E%2e/admin", "/v1/%2f..%2fadmin", "/v1/..%5cadmin",
		"/v1/./x", "/v1/.", "/v1/..", "/v1/%2e", "/v1//admin", "//admin", "/v1;x/../admin", "/v1/%3b", "/v1/a\\b",
		"/v1/%00", "/v1/%0a", "/v1/%zz", "/v1/%", "*", "v1/x"} {
		if got, err := CleanPath(in); err == nil {
			t.Errorf("CleanPath(%q) = %q, want a refusal", in, got)
		}
	}
}

// A URL rule names the decoded path, for allow and deny alike: /v1/%61dmin is /v1/admin, and
// a rule's own path may not hold what CleanPath refuses.
func TestURLRulesMatchDecodedPaths(t *testing.T) {
	rs, err := ParseRules([]string{"http://h.example/v1/ GET"}, []string{"http://h.example/v1/%61dmin"})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/v1/x": "", "/v1/admin": ReasonDenied, "/v1/admin/y": ReasonDenied, "/v2/": ReasonNotAllowed} {
		if got := rs.Request("http", "h.example", 80, "GET", path); got.Reason != want {
			t.Errorf("GET %s: %q, want %q", path, got.Reason, want)
		}
	}
	for _, bad := range []string{"http://h/v1/../admin", "http://h/v1//x", "http://h/a%2fb"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted it", bad)
		}
	}
	if d := rs.URL("http://h.example/v1/%2e%2e/admin"); d.Allowed() || d.Reason != ReasonBadRequest {
		t.Errorf("URL with a dot segment: %+v", d)
	}
}

// pathOrigin is a loopback origin (plain HTTP or HTTPS) that records the request line's
// target and the Authorization header of every request it is sent.
type pathOrigin struct {
	srv  *httptest.Server
	port int
	mu   sync.Mutex
	seen []string // "<target> auth=<Authorization>"
}

func newPathOrigin(t *testing.T, tlsOn bool) *pathOrigin {
	o := &pathOrigin{}
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r.RequestURI+" auth="+r.Header.Get("Authorization"))
		o.mu.Unlock()
		fmt.Fprintf(w, "served %s", r.URL.Path)
	}))
	if tlsOn {
		o.srv.StartTLS()
	} else {
		o.srv.Start()
	}
	t.Cleanup(o.srv.Close)
	o.port = o.srv.Listener.Addr().(*net.TCPAddr).Port
	return o
}

func (o *pathOrigin) requests() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

// exchange writes req on c and reads one answer: its status and body.
func exchange(t *testing.T, c net.Conn, br *bufio.Reader, req string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("writing %q: %v", req, err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the answer to %q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tunnelTo opens a CONNECT tunnel to hostport through the proxy at proxy and returns the TLS
// client inside it (trusting roots) and its reader.
func tunnelTo(t *testing.T, proxy, hostport string, roots *x509.CertPool) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	// The answer to a CONNECT has no body, which ReadResponse knows only from the request.
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", hostport, resp, err)
	}
	host, _, _ := net.SplitHostPort(hostport)
	tc := tls.Client(&buffered{Conn: c, r: br}, &tls.Config{ServerName: host, RootCAs: roots})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the tunnel to %s: %v", hostport, err)
	}
	return tc, bufio.NewReader(tc)
}

// Issue 38, S1: with a rule allowing GET under /v1/ only, a path that an origin resolving dot
// segments or decoding separators would serve from outside /v1/ (/admin) is refused, over
// plain HTTP and inside a terminated HTTPS tunnel, where the host's credential would be
// attached; the origin never sees one. A path under /v1/ in any escaping reaches it, as sent,
// and a deny rule holds for its decoded path.
func TestProxyPathsOutsideTheRuleNeverReachTheOrigin(t *testing.T) {
	plain, secure := newPathOrigin(t, false), newPathOrigin(t, true)
	plainHost := fmt.Sprintf("127.0.0.1:%d", plain.port)
	secureHost := fmt.Sprintf("127.0.0.1:%d", secure.port)
	roots := x509.NewCertPool()
	roots.AddCert(secure.srv.Certificate())
	rules, err := ParseRules([]string{"http://" + plainHost + "/v1/ GET", "https://" + secureHost + "/v1/ GET"},
		[]string{"http://" + plainHost + "/v1/private", "https://" + secureHost + "/v1/private"})
	if err != nil {
		t.Fatal(err)
	}
	p, _, addr := startProxy(t, &Policy{Rules: rules, RootCAs: roots,
		Credentials: []Credential{{Host: "127.0.0.1", Header: "Authorization", Value: func() (string, error) { return "Bearer k3y", nil }}}})

	attacks := []string{"/v1/../admin", "/v1/%2e%2e/admin", "/v1/%2f..%2fadmin", "/v1/..%5cadmin",
		"/v1/./../admin", "/v1//../admin", "/v1;x/../admin", "/v1/%2E%2E/admin"}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, path := range attacks {
		// Each refusal ends its connection: a new one for each.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		code, body := exchange(t, c, bufio.NewReader(c), "GET http://"+plainHost+path+" HTTP/1.1\r\nHost: "+plainHost+"\r\n\r\n")
		c.Close()
		if code != http.StatusForbidden || !strings.Contains(body, ReasonBadRequest) {
			t.Errorf("GET http://%s%s: %d %q, want 403 %s", plainHost, path, code, body, ReasonBadRequest)
		}
		tc, tbr := tunnelTo(t, addr, secureHost, proxyRoots(t, p))
		code, body = exchange(t, tc, tbr, "GET "+path+" HTTP/1.1\r\nHost: "+secureHost+"\r\n\r\n")
		tc.Close()
		if code != http.StatusForbidden || !strings.Contains(body, ReasonBadRequest) {
			t.Errorf("GET https://%s%s in a tunnel: %d %q, want 403 %s", secureHost, path, code, body, ReasonBadRequest)
		}
	}

	// Allowed: under /v1/, in any escaping, sent as the program escaped it; kept alive.
	br := bufio.NewReader(c)
	for _, path := range []string{"/v1/x", "/v1/%78%79"} {
		if code, body := exchange(t, c, br, "GET http://"+plainHost+path+" HTTP/1.1\r\nHost: "+plainHost+"\r\n\r\n"); code != 200 {
			t.Errorf("GET http://%s%s: %d %q", plainHost, path, code, body)
		}
	}
	tc, tbr := tunnelTo(t, addr, secureHost, proxyRoots(t, p))
	if code, body := exchange(t, tc, tbr, "GET /v1/%78 HTTP/1.1\r\nHost: "+secureHost+"\r\n\r\n"); code != 200 || body != "served /v1/x" {
		t.Errorf("GET https://%s/v1/%%78: %d %q", secureHost, code, body)
	}
	// Denied by its decoded path: /v1/%70rivate is /v1/private.
	if code, body := exchange(t, tc, tbr, "GET /v1/%70rivate HTTP/1.1\r\nHost: "+secureHost+"\r\n\r\n"); code != http.StatusForbidden ||
		!strings.Contains(body, ReasonDenied) {
		t.Errorf("GET https://%s/v1/%%70rivate: %d %q, want 403 %s", secureHost, code, body, ReasonDenied)
	}
	tc.Close()

	if got, want := strings.Join(plain.requests(), " | "), "/v1/x auth= | /v1/%78%79 auth="; got != want {
		t.Errorf("the plain origin was sent %q, want %q", got, want)
	}
	if got := secure.requests(); len(got) != 1 || got[0] != "/v1/%78 auth=Bearer k3y" {
		t.Errorf("the HTTPS origin was sent %q, want only /v1/%%78 with the credential", got)
	}
}

// proxyRoots is a pool holding p's CA: what a program behind p trusts.
func proxyRoots(t *testing.T, p *Proxy) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Certificate())
	return pool
}
