package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// origin is a local HTTPS server with its own certificate (httptest's, for 127.0.0.1 and
// example.com names) that records the Authorization header it was sent.
type origin struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
	port int
}

func newOrigin(t *testing.T) *origin {
	o := &origin{}
	o.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.auth = append(o.auth, r.Header.Get("Authorization"))
		o.mu.Unlock()
		fmt.Fprintf(w, "hello from %s %s", r.Method, r.URL.Path)
	}))
	o.StartTLS()
	t.Cleanup(o.Close)
	o.port = o.Listener.Addr().(*net.TCPAddr).Port
	return o
}

func (o *origin) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.auth...)
}

// startProxy serves a proxy on loopback and returns it and a client using it that trusts
// only the proxy's CA.
func startProxy(t *testing.T, pol *Policy) (*Proxy, *http.Client, string) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	p := New(pol, ca)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Serve(l)
	t.Cleanup(p.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	pu, _ := url.Parse("http://" + l.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(c.CloseIdleConnections)
	return p, c, l.Addr().String()
}

func mustRules(t *testing.T, allow ...string) *Rules {
	rs, err := ParseRules(allow, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func originRoots(o *origin) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(o.Certificate())
	return pool
}

func TestProxyAllowsAndRefusesByRule(t *testing.T) {
	o := newOrigin(t)
	lo := netip.MustParseAddr("127.0.0.1")
	pol := &Policy{
		Rules:   mustRules(t, fmt.Sprintf("127.0.0.1:%d", o.port), fmt.Sprintf("*.example.com:%d", o.port)),
		RootCAs: originRoots(o),
		Resolver: Hosts{
			"api.example.com":     {lo},
			"private.example.com": {netip.MustParseAddr("10.1.2.3")},
			"other.test":          {lo},
		},
		Credentials: []Credential{{Host: "api.example.com", Header: "Authorization",
			Value: func() (string, error) { return "Bearer s3cret-value", nil }}},
	}
	p, c, _ := startProxy(t, pol)
	get := func(u string) (int, string, error) {
		resp, err := c.Get(u)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	for _, u := range []string{fmt.Sprintf("https://api.example.com:%d/x", o.port), fmt.Sprintf("https://127.0.0.1:%d/y", o.port)} {
		code, body, err := get(u)
		if err != nil || code != 200 || !strings.HasPrefix(body, "hello from GET") {
			t.Fatalf("GET %s: %d %q %v", u, code, body, err)
		}
	}
	if got := o.seen(); len(got) != 2 || got[0] != "Bearer s3cret-value" || got[1] != "" {
		t.Errorf("the origin saw Authorization %q, want the credential for api.example.com only", got)
	}
	refused := map[string]string{
		fmt.Sprintf("https://other.test:%d/", o.port):          ReasonNotAllowed,
		fmt.Sprintf("https://api.example.com:%d/", o.port+1):   ReasonNotAllowed,
		fmt.Sprintf("https://127.0.0.2:%d/", o.port):           ReasonIPLiteral,
		fmt.Sprintf("https://private.example.com:%d/", o.port): ReasonPrivateAddress,
		fmt.Sprintf("http://other.test:%d/", o.port):           ReasonNotAllowed,
	}
	for u, reason := range refused {
		code, body, err := get(u)
		if err == nil && code != http.StatusForbidden {
			t.Errorf("GET %s: %d %q, want a refusal", u, code, body)
		}
		if err != nil && !strings.Contains(err.Error(), reason) {
			t.Errorf("GET %s: %v, want the reason %s in what the client sees", u, err, reason)
		}
		if err == nil && !strings.Contains(body, reason) {
			t.Errorf("GET %s: body %q does not name the reason %s", u, body, reason)
		}
	}
	st := p.Stats()
	if st.Allowed != 2 || len(st.Refused) != len(refused) {
		t.Errorf("stats %+v: want 2 allowed and %d refused", st, len(refused))
	}
	for _, r := range st.Refused {
		u := fmt.Sprintf("%s:%d", r.Host, r.Port)
		found := false
		for k, reason := range refused {
			if strings.Contains(k, "//"+u+"/") && reason == r.Reason {
				found = true
			}
		}
		if !found {
			t.Errorf("refusal %+v matches no refused request", r)
		}
	}
	if st.BytesIn == 0 || st.BytesOut == 0 {
		t.Errorf("stats %+v: no bytes counted", st)
	}
}

func TestProxyRefusesMismatchedSNIAndNonTLS(t *testing.T) {
	o := newOrigin(t)
	pol := &Policy{Rules: mustRules(t, fmt.Sprintf("*.example.com:%d", o.port)), RootCAs: originRoots(o),
		Resolver: Hosts{"api.example.com": {netip.MustParseAddr("127.0.0.1")}}}
	pol.Rules.Allow = append(pol.Rules.Allow, mustRules(t, fmt.Sprintf("127.0.0.1:%d", o.port)).Allow...)
	p, _, addr := startProxy(t, pol)
	connect := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT api.example.com:%d HTTP/1.1\r\nHost: api.example.com:%d\r\n\r\n", o.port, o.port)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c
	}
	c := connect()
	tc := tls.Client(c, &tls.Config{ServerName: "evil.example.com", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Error("a TLS handshake naming another host than the CONNECT name succeeded")
	}
	c.Close()
	c = connect()
	io.WriteString(c, "SSH-2.0-OpenSSH_9.0\r\n")
	io.Copy(io.Discard, c) // the proxy ends the tunnel
	c.Close()
	p.Close()
	st := p.Stats()
	// Both refusals, in either order: the proxy records each when its tunnel ends, which can
	// be after the client has seen the end and made the next connection.
	want := []Refusal{{"api.example.com", o.port, ReasonNotTLS}, {"api.example.com", o.port, ReasonSNIMismatch}}
	got := slices.Clone(st.Refused)
	slices.SortFunc(got, func(a, b Refusal) int { return strings.Compare(a.Reason, b.Reason) })
	if !slices.Equal(got, want) {
		t.Errorf("refused %+v, want %+v in any order", st.Refused, want)
	}
	if got := o.seen(); len(got) != 0 {
		t.Errorf("the origin was reached %d times", len(got))
	}
}

func TestProxyByteCeiling(t *testing.T) {
	o := newOrigin(t)
	pol := &Policy{Rules: mustRules(t, fmt.Sprintf("127.0.0.1:%d", o.port)), RootCAs: originRoots(o), MaxBytes: 100}
	p, c, _ := startProxy(t, pol)
	if resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/", o.port)); err == nil {
		resp.Body.Close()
		t.Fatal("a request went through a 100-byte ceiling")
	}
	p.Close()
	st := p.Stats()
	if len(st.Refused) != 1 || st.Refused[0].Reason != ReasonByteLimit {
		t.Errorf("refused %+v, want the byte ceiling", st.Refused)
	}
}

// rebinding answers first with an address a rule names, then with a private one: what a DNS
// rebinding attack looks like to the proxy.
type rebinding struct {
	mu    sync.Mutex
	calls int
}

func (r *rebinding) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls == 1 {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("10.11.12.13")}, nil
}

// A name that resolves to an allowed address when decided and to a private one when dialled
// reaches nothing: the dialer checks again and refuses before any packet is sent.
func TestProxyRefusesRebinding(t *testing.T) {
	o := newOrigin(t)
	pol := &Policy{Rules: mustRules(t, fmt.Sprintf("127.0.0.1:%d", o.port), fmt.Sprintf("*.example.com:%d", o.port)),
		RootCAs: originRoots(o), Resolver: &rebinding{}}
	p, c, _ := startProxy(t, pol)
	resp, err := c.Get(fmt.Sprintf("https://rebind.example.com:%d/", o.port))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %d, want 403", resp.StatusCode)
		}
	}
	if got := o.seen(); len(got) != 0 {
		t.Errorf("the origin was reached: %v", got)
	}
	p.Close()
	if st := p.Stats(); len(st.Refused) != 1 || st.Refused[0].Reason != ReasonPrivateAddress || st.Allowed != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Close ends a request an origin never answers: a slow origin cannot hold an execution's end.
func TestProxyCloseEndsAHangingRequest(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	origin.StartTLS()
	defer origin.Close()
	defer close(release)
	port := origin.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(origin.Certificate())
	p, c, _ := startProxy(t, &Policy{Rules: mustRules(t, fmt.Sprintf("127.0.0.1:%d", port)), RootCAs: roots})
	done := make(chan error, 1)
	go func() {
		resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/", port))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-entered
	p.Close() // returns although the origin still holds the request
	if err := <-done; err == nil {
		t.Error("the request through a closed proxy succeeded")
	}
}

// A program looping on refused names cannot grow what is kept of it: the result's list stops
// at maxRefusals, the counts group refusals by host, port and reason (at most maxRefusals
// groups), and the total stays exact.
func TestProxyRefusalCountsAreBoundedAndExact(t *testing.T) {
	p, c, _ := startProxy(t, &Policy{Rules: mustRules(t, "allowed.test:80")})
	get := func(u string) {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET %s: %d, want a refusal", u, resp.StatusCode)
		}
	}
	const same = 40
	for range same {
		get("http://loop.test/")
	}
	distinct := maxRefusals + 5
	for i := range distinct {
		get(fmt.Sprintf("http://n%d.test/", i))
	}
	p.Close()
	st := p.Stats()
	if st.RefusedTotal != int64(same+distinct) || len(st.Refused) != maxRefusals {
		t.Errorf("refused total %d, listed %d; want %d and %d", st.RefusedTotal, len(st.Refused), same+distinct, maxRefusals)
	}
	if len(st.Counts) != maxRefusals || st.Counts[0] != (RefusalCount{Refusal{"loop.test", 80, ReasonNotAllowed}, same}) ||
		st.Counts[1] != (RefusalCount{Refusal{"n0.test", 80, ReasonNotAllowed}, 1}) {
		t.Errorf("counts: %d groups, first %+v", len(st.Counts), st.Counts[:min(2, len(st.Counts))])
	}
	var sum int64
	for _, n := range st.Counts {
		sum += n.Times
	}
	if want := int64(same + maxRefusals - 1); sum != want {
		t.Errorf("the groups count %d refusals, want %d (the rest in the total only)", sum, want)
	}
}

// Issue 38, S2: with "127.0.0.1:A" and a name allowed on ports A and B that resolves to
// 127.0.0.1, the name reaches the address on A, the one port its IP rule names, and is refused
// on B: whoever controls an allowed name's DNS reaches no other port of a private address.
func TestProxyIPRuleAdmitsItsPortOnly(t *testing.T) {
	a, b := newPathOrigin(t, false), newPathOrigin(t, false)
	lo := netip.MustParseAddr("127.0.0.1")
	pol := &Policy{Rules: mustRules(t, fmt.Sprintf("127.0.0.1:%d", a.port), fmt.Sprintf("other.test:%d", a.port), fmt.Sprintf("other.test:%d", b.port)),
		Resolver: Hosts{"other.test": {lo}}}
	p, c, _ := startProxy(t, pol)
	for port, want := range map[int]int{a.port: 200, b.port: http.StatusForbidden} {
		resp, err := c.Get(fmt.Sprintf("http://other.test:%d/", port))
		if err != nil {
			t.Fatalf("GET other.test:%d: %v", port, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET other.test:%d: %d %q, want %d", port, resp.StatusCode, body, want)
		}
	}
	if n := len(b.requests()); n != 0 {
		t.Errorf("127.0.0.1:%d, which no IP rule names, was reached %d times through other.test", b.port, n)
	}
	p.Close()
	if st := p.Stats(); len(st.Refused) != 1 || st.Refused[0] != (Refusal{"other.test", b.port, ReasonPrivateAddress}) {
		t.Errorf("refused %+v, want other.test:%d private_address", st.Refused, b.port)
	}
}

// Issue 38: TRACE (and TRACK) to a host the proxy adds a credential to is refused, since an
// origin that honours it echoes the credential back; so is a CONNECT inside a tunnel. TRACE to
// a host without a credential goes on.
func TestProxyRefusesEchoingMethodsToCredentialedHosts(t *testing.T) {
	o := newOrigin(t)
	lo := netip.MustParseAddr("127.0.0.1")
	pol := &Policy{Rules: mustRules(t, fmt.Sprintf("api.example.com:%d", o.port), fmt.Sprintf("plain.example.com:%d", o.port),
		fmt.Sprintf("127.0.0.1:%d", o.port)),
		RootCAs:  originRoots(o),
		Resolver: Hosts{"api.example.com": {lo}, "plain.example.com": {lo}},
		Credentials: []Credential{{Host: "api.example.com", Header: "Authorization",
			Value: func() (string, error) { return "Bearer s3cret-value", nil }}}}
	p, _, addr := startProxy(t, pol)
	roots := proxyRoots(t, p)
	send := func(host, req string) (int, string) {
		tc, br := tunnelTo(t, addr, fmt.Sprintf("%s:%d", host, o.port), roots)
		defer tc.Close()
		return exchange(t, tc, br, req)
	}
	for _, m := range []string{"TRACE", "TRACK", "trace"} {
		if code, body := send("api.example.com", m+" / HTTP/1.1\r\nHost: api.example.com\r\n\r\n"); code != http.StatusForbidden ||
			!strings.Contains(body, ReasonMethod) || strings.Contains(body, "s3cret") {
			t.Errorf("%s to the credentialed host: %d %q, want 403 %s", m, code, body, ReasonMethod)
		}
	}
	// (A CONNECT naming another host is refused by the Host check, sni_mismatch.)
	if code, body := send("api.example.com", fmt.Sprintf("CONNECT api.example.com:%d HTTP/1.1\r\nHost: api.example.com\r\n\r\n", o.port)); code != http.StatusForbidden ||
		!strings.Contains(body, ReasonMethod) {
		t.Errorf("CONNECT inside a tunnel: %d %q, want 403 %s", code, body, ReasonMethod)
	}
	if code, body := send("plain.example.com", "TRACE / HTTP/1.1\r\nHost: plain.example.com\r\n\r\n"); code != 200 {
		t.Errorf("TRACE to a host without a credential: %d %q", code, body)
	}
	if got := o.seen(); len(got) != 1 || got[0] != "" {
		t.Errorf("the origin saw Authorization %q, want one request without it", got)
	}
}

// TestStatsRecord: what the run ledger keeps of a proxy's decisions is the JSON of every
// refusal counted and grouped by host, port and reason, beside the requests allowed and the
// bytes each way; no group is an empty list, never null.
func TestStatsRecord(t *testing.T) {
	st := Stats{Allowed: 3, Refused: []Refusal{{"a.test", 443, ReasonNotAllowed}}, BytesIn: 4096, BytesOut: 512, RefusedTotal: 12,
		Counts: []RefusalCount{{Refusal{"a.test", 443, ReasonNotAllowed}, 10}, {Refusal{"10.0.0.1", 80, "ip_literal"}, 2}}}
	want := `{"allowed":3,"refused":12,"refusals":[{"host":"a.test","port":443,"reason":"` + ReasonNotAllowed + `","times":10},` +
		`{"host":"10.0.0.1","port":80,"reason":"ip_literal","times":2}],"bytes_in":4096,"bytes_out":512}`
	if got := string(st.Record()); got != want {
		t.Errorf("Record() = %s\nwant %s", got, want)
	}
	if got := string((Stats{Allowed: 1}).Record()); got != `{"allowed":1,"refused":0,"refusals":[],"bytes_in":0,"bytes_out":0}` {
		t.Errorf("Record() of no refusals = %s", got)
	}
}
