package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Resolver finds a name's addresses; *net.Resolver is one. Tests give a Hosts.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Hosts is a Resolver that knows only its own names (lower case): a test's, or an operator's
// pinned map. It never asks DNS.
type Hosts map[string][]netip.Addr

// LookupNetIP returns the addresses h maps host to, of network's family.
func (h Hosts) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range h[canonicalHost(host)] {
		if network == "ip" || network == "ip4" && a.Unmap().Is4() || network == "ip6" && a.Is6() && !a.Is4In6() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host in the proxy's host map", Name: host, IsNotFound: true}
	}
	return out, nil
}

// Credential is a header the proxy adds to every HTTPS request for Host (a name, or *.suffix);
// Value reads the secret at each request. The program never sees it: the header is added on
// the host's side of the proxy's TLS termination.
type Credential struct {
	Host   string
	Header string
	Value  func() (string, error)
}

func (c Credential) applies(host string) bool {
	h := strings.ToLower(c.Host)
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		return strings.HasSuffix(host, "."+rest)
	}
	return host == h
}

// Policy is what a Proxy enforces.
type Policy struct {
	Rules       *Rules
	Credentials []Credential
	// Resolver resolves names; nil is the system's. The proxy, never the program, resolves.
	Resolver Resolver
	// RootCAs verify origins; nil is the system's roots.
	RootCAs *x509.CertPool
	// MaxBytes bounds the bytes crossing the proxy's sandbox side, both ways together; 0: none.
	MaxBytes int64
	// Logger receives a line per refusal (never a credential); nil discards.
	Logger *slog.Logger
}

// Stats are the decisions of one proxy: the result's network block (docs/design.md §10).
type Stats struct {
	Allowed  int       `json:"allowed"`
	Refused  []Refusal `json:"refused"`
	BytesIn  int64     `json:"bytes_in"`  // into the sandbox
	BytesOut int64     `json:"bytes_out"` // out of the sandbox
	// RefusedTotal counts every refusal, listed in Refused or not; Counts groups them by
	// host, port and reason, in the order each was first refused (at most maxRefusals
	// groups; a refusal of a group past them is in RefusedTotal only). What the run ledger
	// keeps of the execution; not in the result, whose shape is fixed.
	RefusedTotal int64          `json:"-"`
	Counts       []RefusalCount `json:"-"`
}

// RefusalCount is how many times one host, port and reason were refused.
type RefusalCount struct {
	Refusal
	Times int64 `json:"times"`
}

// Record is what the run ledger keeps of the decisions, as JSON it holds as it is
// (budget.ExecutionEnd.Network): the requests allowed, every refusal counted (refused) and
// grouped by host, port and reason (refusals), and the bytes each way.
func (s Stats) Record() json.RawMessage {
	counts := s.Counts
	if counts == nil {
		counts = []RefusalCount{}
	}
	b, _ := json.Marshal(struct {
		Allowed  int            `json:"allowed"`
		Refused  int64          `json:"refused"`
		Refusals []RefusalCount `json:"refusals"`
		BytesIn  int64          `json:"bytes_in"`
		BytesOut int64          `json:"bytes_out"`
	}{s.Allowed, s.RefusedTotal, counts, s.BytesIn, s.BytesOut}) // numbers and strings: never fails
	return b
}

// Refusal is one refused connection or request.
type Refusal struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Reason string `json:"reason"`
}

// maxRefusals bounds the refusals Stats lists: a program looping on a refused name must not
// grow the result without bound. Further refusals are still refused, and logged.
const maxRefusals = 256

// Proxy is a forward proxy for one execution: HTTP CONNECT (terminated with the CA) and
// plain HTTP, on whatever listener Serve is given.
type Proxy struct {
	pol *Policy
	ca  *CA
	tr  *http.Transport
	log *slog.Logger

	in, out atomic.Int64
	// ctx bounds every lookup, handshake and request to an origin: Close cancels it, so a
	// slow origin never holds the end of an execution.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // guards allowed, refused, refusedN, counts, conns, ls and closed
	allowed  int
	refused  []Refusal
	refusedN int64
	counts   []RefusalCount
	countAt  map[Refusal]int // index in counts
	conns    map[net.Conn]struct{}
	ls       []net.Listener
	closed   bool

	wg sync.WaitGroup
}

// New returns a proxy enforcing pol, terminating TLS with ca.
func New(pol *Policy, ca *CA) *Proxy {
	if pol.Rules == nil {
		pol.Rules = &Rules{}
	}
	p := &Proxy{pol: pol, ca: ca, conns: map[net.Conn]struct{}{}, log: pol.Logger}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.tr = &http.Transport{
		DialContext:         p.dial,
		TLSClientConfig:     &tls.Config{RootCAs: pol.RootCAs, MinVersion: tls.VersionTLS12},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	return p
}

// Serve accepts connections on l until Close, each on its own goroutine; it returns at once.
func (p *Proxy) Serve(l net.Listener) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return
	}
	p.ls = append(p.ls, l)
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			if !p.track(c) {
				c.Close()
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer p.untrack(c)
				p.serveConn(&counted{Conn: c, p: p})
			}()
		}
	}()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Close stops accepting, ends every connection and waits for the proxy's goroutines. It is
// idempotent. The program's connections are closed before the origins' context is cancelled:
// the other order lets a request cut short answer the program with a 502 in between, and a
// closed proxy must answer nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for _, l := range p.ls {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.tr.CloseIdleConnections()
}

// Stats returns the decisions so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Allowed: p.allowed, Refused: append([]Refusal{}, p.refused...), BytesIn: p.in.Load(), BytesOut: p.out.Load(),
		RefusedTotal: p.refusedN, Counts: append([]RefusalCount{}, p.counts...)}
}

func (p *Proxy) allow() {
	p.mu.Lock()
	p.allowed++
	p.mu.Unlock()
}

func (p *Proxy) refuse(host string, port int, reason, rule string) {
	p.log.Info("egress refused", "host", host, "port", port, "reason", reason, "rule", rule)
	p.mu.Lock()
	r := Refusal{Host: host, Port: port, Reason: reason}
	if len(p.refused) < maxRefusals {
		p.refused = append(p.refused, r)
	}
	p.refusedN++
	if i, ok := p.countAt[r]; ok {
		p.counts[i].Times++
	} else if len(p.counts) < maxRefusals {
		if p.countAt == nil {
			p.countAt = map[Refusal]int{}
		}
		p.countAt[r] = len(p.counts)
		p.counts = append(p.counts, RefusalCount{Refusal: r, Times: 1})
	}
	p.mu.Unlock()
}

// counted counts the bytes on the sandbox's side and enforces MaxBytes.
type counted struct {
	net.Conn
	p    *Proxy
	once sync.Once
}

var errByteLimit = errors.New("egress: the execution's network byte ceiling is reached")

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.out.Add(int64(n))
	if err == nil && c.over() {
		return n, errByteLimit
	}
	return n, err
}

func (c *counted) Write(b []byte) (int, error) {
	if c.over() {
		return 0, errByteLimit
	}
	n, err := c.Conn.Write(b)
	c.p.in.Add(int64(n))
	return n, err
}

func (c *counted) over() bool {
	m := c.p.pol.MaxBytes
	if m <= 0 || c.p.in.Load()+c.p.out.Load() <= m {
		return false
	}
	c.once.Do(func() { c.p.refuse("", 0, ReasonByteLimit, "max_bytes") })
	c.Conn.Close()
	return true
}

// MaxHeadBytes bounds the bytes the proxy reads of one request's line and headers, each
// request of a kept-alive connection and of a tunnel anew: past it the request is answered
// 431 and its connection ends. net/http's parser alone bounds neither (a 62 MiB header line
// was held whole). Bodies are bounded by Policy.MaxBytes.
const MaxHeadBytes = 64 << 10

// errHeadTooLarge is what a headReader gives once a request's head has used MaxHeadBytes.
var errHeadTooLarge = errors.New("egress: a request's line and headers are over the proxy's bound")

// headReader reads a connection for a bufio.Reader, at most left bytes while a request's head
// is read (left < 0: a body, unbounded here).
type headReader struct {
	r    io.Reader
	left int
}

func (h *headReader) Read(b []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(b)
	}
	if h.left == 0 {
		return 0, errHeadTooLarge
	}
	n, err := h.r.Read(b[:min(len(b), h.left)])
	h.left -= n
	return n, err
}

// requests reads one connection's requests (a program's, or a tunnel's inside TLS), each with
// its head bounded by MaxHeadBytes.
type requests struct {
	h  headReader
	br *bufio.Reader
}

func newRequests(r io.Reader) *requests {
	q := &requests{h: headReader{r: r}}
	q.br = bufio.NewReader(&q.h)
	return q
}

// next reads the next request. What the buffer holds already counts against its head's bound,
// so no more than MaxHeadBytes of a head is ever read from the connection.
func (q *requests) next() (*http.Request, error) {
	q.h.left = max(0, MaxHeadBytes-q.br.Buffered())
	req, err := http.ReadRequest(q.br)
	q.h.left = -1
	return req, err
}

// readFailed answers a request that could not be read, when it was not the connection's end:
// 431 for a head over MaxHeadBytes, else 400 with what. host and port name the tunnel, if any.
func (p *Proxy) readFailed(c net.Conn, err error, host string, port int, what string) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, errByteLimit):
		return
	case errors.Is(err, errHeadTooLarge):
		p.refuse(host, port, ReasonBadRequest, "")
		writeStatus(c, http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large",
			fmt.Sprintf("mcp-sandbox egress: a request's line and headers may take %d bytes; this one took more, and was not forwarded (%s)\n",
				MaxHeadBytes, ReasonBadRequest))
		p.lingerClose(c)
	default:
		p.refuse(host, port, ReasonBadRequest, "")
		writeStatus(c, http.StatusBadRequest, "Bad Request", "mcp-sandbox egress: "+what+"\n")
	}
}

// lingerClose ends the sending half of c and waits a moment before the caller closes it, as
// net/http's server does after refusing a request it did not read whole: closing at once with
// unread bytes queued resets the connection, and the client may lose the answer before
// reading it.
func (p *Proxy) lingerClose(c net.Conn) {
	var cw interface{ CloseWrite() error }
	switch x := c.(type) {
	case *counted:
		cw, _ = x.Conn.(interface{ CloseWrite() error })
	case *tls.Conn:
		cw = x
	}
	if cw == nil || cw.CloseWrite() != nil {
		return
	}
	t := time.NewTimer(lingerAfterRefusal)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
	}
}

// lingerAfterRefusal is how long lingerClose waits: net/http's rstAvoidanceDelay.
const lingerAfterRefusal = 500 * time.Millisecond

// serveConn reads requests from one connection of the program's until it ends.
func (p *Proxy) serveConn(c net.Conn) {
	q := newRequests(c)
	for {
		req, err := q.next()
		if err != nil {
			p.readFailed(c, err, "", 0, "that was not an HTTP proxy request")
			return
		}
		if req.Method == http.MethodConnect {
			p.tunnel(c, q.br, req)
			return
		}
		if !p.plain(c, req) {
			return
		}
	}
}

// plain forwards one absolute-URI request; false ends the connection.
func (p *Proxy) plain(c net.Conn, req *http.Request) bool {
	u := req.URL
	host, port := canonicalHost(u.Hostname()), 80
	if u.Scheme != "http" || host == "" {
		p.refuse(host, 0, ReasonScheme, "")
		refusal(c, req.Method+" "+u.Redacted(), ReasonScheme,
			"only http:// URLs are forwarded as requests; reach https:// through CONNECT (HTTPS_PROXY)")
		return false
	}
	if s := u.Port(); s != "" {
		n, err := parsePort(s)
		if err != nil {
			refusal(c, req.Method, ReasonBadRequest, "the URL's port is not 1-65535")
			return false
		}
		port = n
	}
	where := "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	path, ok := p.decide(c, req, "http", host, port, where)
	if !ok {
		return false
	}
	if _, reason := p.resolve(p.ctx, host, port); reason != "" {
		p.refuse(host, port, reason, "")
		refusal(c, "http://"+net.JoinHostPort(host, strconv.Itoa(port)), reason, explainAddr(reason, host))
		return false
	}
	return p.forward(c, req, "http", host, port, path, false)
}

// decide checks one request to scheme://host:port (where names it for a refusal) against the
// rules, on its decoded path (CleanPath), and returns that path. A request it refuses is
// answered here; ok false ends the connection.
func (p *Proxy) decide(c net.Conn, req *http.Request, scheme, host string, port int, where string) (path string, ok bool) {
	escaped := req.URL.EscapedPath()
	path, err := CleanPath(escaped)
	if err != nil {
		p.refuse(host, port, ReasonBadRequest, "")
		refusal(c, req.Method+" "+where+escaped, ReasonBadRequest, "its path "+err.Error()+"; send the path the origin should serve")
		return "", false
	}
	if why := p.methodRefused(req.Method, host, scheme); why != "" {
		p.refuse(host, port, ReasonMethod, "")
		refusal(c, req.Method+" "+where+path, ReasonMethod, why)
		return "", false
	}
	if d := p.pol.Rules.Request(scheme, host, port, req.Method, path); !d.Allowed() {
		p.refuse(host, port, d.Reason, d.Rule)
		refusal(c, req.Method+" "+where+path, d.Reason, explain(d, host, port))
		return "", false
	}
	return path, true
}

// methodRefused says why method is never forwarded to host over scheme, or "": a method an
// origin answers by echoing the request (TRACE, and IIS's TRACK) to a host the proxy adds a
// credential to, since the echo would hand the credential to the program; and CONNECT inside
// a tunnel, which the proxy does not carry on (each request in a tunnel is re-sent as a
// request).
func (p *Proxy) methodRefused(method, host, scheme string) string {
	switch m := strings.ToUpper(method); {
	case m == http.MethodConnect && scheme == "https":
		return "a CONNECT inside a tunnel is not forwarded"
	case m == http.MethodTrace || m == "TRACK":
		for _, cr := range p.pol.Credentials {
			if cr.applies(host) {
				return fmt.Sprintf("%s is not forwarded to %s, which this execution's proxy adds a credential to: its answer would echo it", m, host)
			}
		}
	}
	return ""
}

// tunnel serves a CONNECT: decides it, terminates TLS with the CA, and forwards each request
// inside it, with the credentials for its host.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, req *http.Request) {
	hostport := req.Host
	h, ps, err := net.SplitHostPort(hostport)
	port, perr := parsePort(ps)
	if err != nil || perr != nil {
		p.refuse(hostport, 0, ReasonBadRequest, "")
		refusal(c, "CONNECT "+hostport, ReasonBadRequest, "CONNECT needs host:port")
		return
	}
	host := canonicalHost(h)
	if d := p.pol.Rules.Connect(host, port); !d.Allowed() {
		p.refuse(host, port, d.Reason, d.Rule)
		refusal(c, "CONNECT "+net.JoinHostPort(host, ps), d.Reason, explain(d, host, port))
		return
	}
	if _, reason := p.resolve(p.ctx, host, port); reason != "" {
		p.refuse(host, port, reason, "")
		refusal(c, "CONNECT "+net.JoinHostPort(host, ps), reason, explainAddr(reason, host))
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var sniRefused bool
	conf := &tls.Config{
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" && canonicalHost(hello.ServerName) != host {
				sniRefused = true
				return nil, fmt.Errorf("egress: SNI %q does not match the CONNECT name", hello.ServerName)
			}
			return p.ca.Leaf(host)
		},
	}
	tc := tls.Server(&buffered{Conn: c, r: br}, conf)
	if err := tc.HandshakeContext(p.ctx); err != nil {
		var rh tls.RecordHeaderError
		switch {
		case sniRefused:
			p.refuse(host, port, ReasonSNIMismatch, "")
		case errors.As(err, &rh):
			p.refuse(host, port, ReasonNotTLS, "")
		}
		return
	}
	q := newRequests(tc)
	for {
		r, err := q.next()
		if err != nil {
			p.readFailed(tc, err, host, port, "that was not an HTTP request")
			return
		}
		if rh := r.Host; rh != "" && canonicalHost(hostOnly(rh)) != host {
			p.refuse(host, port, ReasonSNIMismatch, "")
			refusal(tc, r.Method+" "+r.URL.Path, ReasonSNIMismatch,
				"the request's Host header names another host than the tunnel's CONNECT name")
			return
		}
		path, ok := p.decide(tc, r, "https", host, port, "https://"+net.JoinHostPort(host, ps))
		if !ok {
			return
		}
		if !p.forward(tc, r, "https", host, port, path, true) {
			return
		}
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// hopHeaders are a single hop's, never forwarded (RFC 9110, section 7.6.1), and the proxy's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends req on to scheme://host:port, for path (its decoded path, as decided), and
// writes the answer to c; false ends the connection. secure adds the credentials for host.
func (p *Proxy) forward(c net.Conn, req *http.Request, scheme, host string, port int, path string, secure bool) bool {
	out := req.Clone(p.ctx)
	out.RequestURI = ""
	// The path decided is the path sent: as the program escaped it when that decodes to it
	// (CleanPath found nothing an origin could read otherwise), else escaped anew.
	out.URL.Path, out.URL.RawPath = path, req.URL.EscapedPath()
	out.URL.Scheme, out.URL.Host = scheme, net.JoinHostPort(host, strconv.Itoa(port))
	if port == defaultPort(scheme) {
		out.URL.Host = hostForURL(host)
	}
	out.Host = ""
	for _, h := range req.Header.Values("Connection") {
		for _, f := range strings.Split(h, ",") {
			out.Header.Del(strings.TrimSpace(f))
		}
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if secure {
		for _, cr := range p.pol.Credentials {
			if !cr.applies(host) {
				continue
			}
			v, err := cr.Value()
			if err != nil {
				p.log.Warn("egress credential unavailable", "host", host, "header", cr.Header, "err", err)
				refusal(c, req.Method+" "+req.URL.Path, ReasonUpstreamFailed,
					"the credential for this host could not be read on the host; the request was not sent")
				return false
			}
			out.Header.Set(cr.Header, v)
		}
	}
	resp, err := p.tr.RoundTrip(out)
	var dr *dialRefused
	if errors.As(err, &dr) {
		// The name resolves elsewhere now than when it was decided (DNS rebinding).
		p.refuse(host, port, dr.reason, "")
		refusal(c, req.Method+" "+scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port)), dr.reason, explainAddr(dr.reason, host))
		return false
	}
	if err != nil {
		p.refuse(host, port, ReasonUpstreamFailed, "")
		p.log.Info("egress origin failed", "host", host, "port", port, "err", err)
		writeStatus(c, http.StatusBadGateway, "Bad Gateway",
			fmt.Sprintf("mcp-sandbox egress: %s:%d could not be reached or did not prove its identity\n", host, port))
		return false
	}
	defer resp.Body.Close()
	p.allow()
	for _, h := range resp.Header.Values("Connection") {
		for _, f := range strings.Split(h, ",") {
			resp.Header.Del(strings.TrimSpace(f))
		}
	}
	for _, h := range hopHeaders {
		if h != "Transfer-Encoding" {
			resp.Header.Del(h)
		}
	}
	resp.Close = resp.Close || req.Close
	if err := resp.Write(c); err != nil {
		return false
	}
	return !resp.Close
}

func hostForURL(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// resolve returns the addresses host may be reached at on port, or why none may: a name
// resolves through the policy's resolver, and an address no rule names with that port must
// be public.
func (p *Proxy) resolve(ctx context.Context, host string, port int) ([]netip.Addr, string) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a = a.Unmap(); Public(a) || p.pol.Rules.Names(a, port) {
			return []netip.Addr{a}, ""
		}
		return nil, ReasonIPLiteral
	}
	var r Resolver = net.DefaultResolver
	if p.pol.Resolver != nil {
		r = p.pol.Resolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, ReasonUnresolved
	}
	var ok []netip.Addr
	for _, a := range addrs {
		if a = a.Unmap(); Public(a) || p.pol.Rules.Names(a, port) {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		return nil, ReasonPrivateAddress
	}
	return ok, ""
}

// dial is the transport's: it resolves and checks again, so the address connected to is
// always one the rules allow, whatever the name resolves to by now.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := parsePort(ps)
	if err != nil {
		return nil, err
	}
	addrs, reason := p.resolve(ctx, canonicalHost(host), port)
	if reason != "" {
		return nil, &dialRefused{host: host, reason: reason}
	}
	var d net.Dialer
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), ps))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// dialRefused is the dialer's refusal of every address a name resolves to by then.
type dialRefused struct{ host, reason string }

func (e *dialRefused) Error() string { return fmt.Sprintf("egress: %s refused (%s)", e.host, e.reason) }

// buffered reads what a bufio.Reader holds before the connection itself.
type buffered struct {
	net.Conn
	r *bufio.Reader
}

func (b *buffered) Read(p []byte) (int, error) { return b.r.Read(p) }

func explain(d Decision, host string, port int) string {
	switch d.Reason {
	case ReasonDenied:
		return fmt.Sprintf("the network rule %q of this execution denies %s:%d", d.Rule, host, port)
	case ReasonIPLiteral:
		return fmt.Sprintf("%s is an address asked for by number, and no allow rule names it with port %d", host, port)
	}
	return fmt.Sprintf("no allow rule of this execution's network names %s:%d for this request", host, port)
}

func explainAddr(reason, host string) string {
	switch reason {
	case ReasonPrivateAddress:
		return fmt.Sprintf("%s resolves only to private, loopback, link-local or metadata addresses, and no allow rule names them", host)
	case ReasonIPLiteral:
		return fmt.Sprintf("%s is a private, loopback, link-local or metadata address no allow rule names", host)
	}
	return fmt.Sprintf("the proxy could not resolve %s", host)
}

// refusal answers 403 with a reason phrase and a body naming what was refused and why: a
// program sees it whether its client shows the tunnel's status line (urllib's "Tunnel
// connection failed") or a response body.
func refusal(w io.Writer, what, reason, why string) {
	writeStatus(w, http.StatusForbidden, "Forbidden by mcp-sandbox egress ("+reason+")",
		fmt.Sprintf("mcp-sandbox egress refused %s: %s (%s)\n", what, why, reason))
}

func writeStatus(w io.Writer, code int, phrase, body string) {
	phrase = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, phrase)
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, phrase, len(body), body)
}
