package egress

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Rule is one entry of an allow or deny list (docs/design.md §10): a host name
// (api.example.com), a suffix (*.example.com: any name below it, not the name itself), an IP
// address (127.0.0.1, [::1]), each with an optional :port (without one, 443 and 80), or a URL
// prefix with optional methods ("http://h.example/v1/ GET,POST"), which holds for requests
// whose scheme, host and port are the rule's and whose path, decoded (CleanPath), is under the
// rule's.
type Rule struct {
	text      string
	host      string     // lower case, without the "*." of a suffix
	suffix    bool       // *.host
	addr      netip.Addr // an IP rule's address
	port      int        // 0: 443 and 80
	scheme    string     // a URL rule's: http or https
	path      string     // a URL rule's path prefix, decoded (CleanPath)
	methods   []string   // a URL rule's methods; none: any
	urlRule   bool
	ipLiteral bool
}

// String is the rule as written.
func (r Rule) String() string { return r.text }

// ParseRule reads one rule.
func ParseRule(s string) (Rule, error) {
	text := strings.TrimSpace(s)
	r := Rule{text: text}
	if text == "" {
		return r, fmt.Errorf("an empty network rule")
	}
	if strings.Contains(text, "://") {
		return parseURLRule(r, text)
	}
	if strings.ContainsAny(text, " \t/") {
		return r, fmt.Errorf("network rule %q: a host, *.suffix or address with an optional :port, or a URL prefix", text)
	}
	host, port, err := splitHostPort(text)
	if err != nil {
		return r, fmt.Errorf("network rule %q: %v", text, err)
	}
	r.port = port
	return r, r.setHost(host)
}

func parseURLRule(r Rule, text string) (Rule, error) {
	raw, methods, _ := strings.Cut(text, " ")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return r, fmt.Errorf("network rule %q: a URL rule is http:// or https://, a host and a path prefix, with no credentials, query or fragment", text)
	}
	r.urlRule, r.scheme = true, u.Scheme
	if r.path, err = CleanPath(u.EscapedPath()); err != nil {
		return r, fmt.Errorf("network rule %q: its path %v", text, err)
	}
	r.port = defaultPort(u.Scheme)
	if p := u.Port(); p != "" {
		if r.port, err = parsePort(p); err != nil {
			return r, fmt.Errorf("network rule %q: %v", text, err)
		}
	}
	for _, m := range strings.FieldsFunc(methods, func(c rune) bool { return c == ',' || c == ' ' }) {
		m = strings.ToUpper(m)
		if !validMethod(m) {
			return r, fmt.Errorf("network rule %q: %q is not an HTTP method", text, m)
		}
		r.methods = append(r.methods, m)
	}
	if err := r.setHost(u.Hostname()); err != nil {
		return r, err
	}
	if r.suffix {
		return r, fmt.Errorf("network rule %q: a URL rule names one host, not a suffix", text)
	}
	return r, nil
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func (r *Rule) setHost(host string) error {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		r.addr, r.ipLiteral, r.host = a.Unmap(), true, a.Unmap().String()
		return nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		r.suffix, h = true, rest
	}
	if !validName(h) {
		return fmt.Errorf("network rule %q: %q is not a host name", r.text, host)
	}
	r.host = h
	return nil
}

// validName accepts letters, digits, '-', '_' and dots between non-empty labels.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// splitHostPort splits "h", "h:p", "[v6]" or "[v6]:p"; a bare IPv6 address has no port.
func splitHostPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("an unclosed [")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, fmt.Errorf("text after ]")
		}
		port, err := parsePort(p)
		return host, port, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, nil // a bare IPv6 address
	}
	host, p, ok := strings.Cut(s, ":")
	if !ok {
		return host, 0, nil
	}
	port, err := parsePort(p)
	return host, port, err
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not 1-65535", p)
	}
	return n, nil
}

func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}

// matchesHost reports whether r names host (lower case; an address in its canonical form).
func (r Rule) matchesHost(host string) bool {
	if r.ipLiteral {
		a, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == r.addr
	}
	if r.suffix {
		return strings.HasSuffix(host, "."+r.host)
	}
	return host == r.host
}

func (r Rule) matchesPort(port int) bool {
	if r.port == 0 {
		return port == 443 || port == 80
	}
	return r.port == port
}

// matchesRequest reports whether a URL rule holds for a request; a host rule holds for any.
func (r Rule) matchesRequest(scheme, method, path string) bool {
	if !r.urlRule {
		return true
	}
	if scheme != r.scheme || !pathUnder(path, r.path) {
		return false
	}
	if len(r.methods) == 0 {
		return true
	}
	for _, m := range r.methods {
		if m == method {
			return true
		}
	}
	return false
}

// pathUnder reports whether path is under prefix, both decoded (CleanPath): "/v1" holds for
// /v1 and /v1/x, not /v10.
func pathUnder(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return strings.HasSuffix(prefix, "/") || len(path) == len(prefix) || path[len(prefix)] == '/'
}

// CleanPath decodes an escaped request path (as sent: "/v1/a%20b") into the one path every
// origin takes it for, or says why there is none (docs/design.md §18). A URL rule names a
// decoded path, and a request is matched on its decoded path: "/v1/%61dmin" is /v1/admin to
// an allow or a deny rule alike. What an origin may resolve into another path than the one
// matched is refused rather than guessed at: a "." or ".." segment (RFC 3986, section 5.2.4, would
// take /v1/../admin out of /v1/), a slash or backslash encoded inside a segment (%2f, %5c:
// some origins decode them into separators), a raw backslash, ";" (path parameters some
// origins strip, /v1;x/../admin), an empty segment inside the path ("//": some origins merge
// slashes), a control character and an escape that does not decode. The empty path is "/".
func CleanPath(escaped string) (string, error) {
	if escaped == "" {
		return "/", nil
	}
	if escaped[0] != '/' {
		return "", fmt.Errorf("%q does not start with /", escaped)
	}
	segs := strings.Split(escaped[1:], "/")
	for i, seg := range segs {
		d, err := url.PathUnescape(seg)
		switch {
		case err != nil:
			return "", fmt.Errorf("segment %q is not a valid percent-encoding", seg)
		case seg == "" && i < len(segs)-1:
			return "", fmt.Errorf("%q has an empty segment (//), which some origins merge", escaped)
		case d == "." || d == "..":
			return "", fmt.Errorf("%q has a dot segment (%s), which an origin resolves out of the path matched", escaped, seg)
		case strings.ContainsAny(d, "/\\"):
			return "", fmt.Errorf("segment %q holds a slash or a backslash, which some origins take for a separator", seg)
		case strings.ContainsRune(d, ';'):
			return "", fmt.Errorf("segment %q holds \";\", whose parameters some origins strip", seg)
		case strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return "", fmt.Errorf("segment %q holds a control character", seg)
		}
		segs[i] = d
	}
	return "/" + strings.Join(segs, "/"), nil
}

// Rules are an allow list and a deny list. A connection is allowed when an allow rule names
// its host and port and no deny rule does; a request on it, when moreover a rule naming the
// host holds for its scheme, method and path (a host rule holds for every request, a URL rule
// for those under it) and no deny URL rule does. The zero value allows nothing.
type Rules struct {
	Allow, Deny []Rule
}

// ParseRules reads allow and deny lists.
func ParseRules(allow, deny []string) (*Rules, error) {
	rs := &Rules{}
	for _, s := range allow {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		rs.Allow = append(rs.Allow, r)
	}
	for _, s := range deny {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		rs.Deny = append(rs.Deny, r)
	}
	return rs, nil
}

// Decision is what the rules say about a connection or a request: Reason is empty when it
// is allowed; Rule names the rule that decided, when one did.
type Decision struct {
	Reason string
	Rule   string
}

// Allowed reports whether d allows.
func (d Decision) Allowed() bool { return d.Reason == "" }

// Why a connection or request is refused (Refusal.Reason). The strings are permanent API.
const (
	ReasonNotAllowed     = "not_allowed"     // no allow rule names it
	ReasonDenied         = "denied"          // a deny rule names it
	ReasonIPLiteral      = "ip_literal"      // an address asked for by number that no rule names
	ReasonPrivateAddress = "private_address" // the name resolves to a private, loopback, link-local or metadata address
	ReasonUnresolved     = "unresolved"      // the proxy's resolver has no address for the name
	ReasonSNIMismatch    = "sni_mismatch"    // the TLS client asked for another name than it CONNECTed to
	ReasonNotTLS         = "not_tls"         // a tunnel's first bytes were not a TLS handshake
	ReasonBadRequest     = "bad_request"     // not HTTP, or HTTP the proxy cannot forward
	ReasonByteLimit      = "max_bytes"       // the execution's network byte ceiling was reached
	ReasonUpstreamFailed = "upstream_failed" // the origin could not be reached or verified
	ReasonScheme         = "scheme_not_http" // a forward request for a scheme other than http
	ReasonMethod         = "method_refused"  // TRACE to a host with a credential, CONNECT inside a tunnel
)

// Connect decides a connection to host:port (host lower case, an address canonical).
func (rs *Rules) Connect(host string, port int) Decision {
	host = canonicalHost(host)
	for _, r := range rs.Deny {
		if !r.urlRule && r.matchesHost(host) && r.matchesPort(port) {
			return Decision{Reason: ReasonDenied, Rule: r.text}
		}
	}
	for _, r := range rs.Allow {
		if r.matchesHost(host) && r.matchesPort(port) {
			return Decision{Rule: r.text}
		}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return Decision{Reason: ReasonIPLiteral}
	}
	return Decision{Reason: ReasonNotAllowed}
}

// Request decides one request to scheme://host:port with method and path, the request's path
// decoded by CleanPath.
func (rs *Rules) Request(scheme, host string, port int, method, path string) Decision {
	host = canonicalHost(host)
	if d := rs.Connect(host, port); !d.Allowed() {
		return d
	}
	for _, r := range rs.Deny {
		if r.urlRule && r.matchesHost(host) && r.matchesPort(port) && r.matchesRequest(scheme, method, path) {
			return Decision{Reason: ReasonDenied, Rule: r.text}
		}
	}
	for _, r := range rs.Allow {
		if r.matchesHost(host) && r.matchesPort(port) && r.matchesRequest(scheme, method, path) {
			return Decision{Rule: r.text}
		}
	}
	return Decision{Reason: ReasonNotAllowed}
}

// Names reports whether an allow rule names addr by number with port: only then may a name
// resolve to a private address, or a program connect to an address by number. An IP rule
// admits its address on its own port only, whichever name resolved to it: "127.0.0.1:8080"
// beside "other.test:8081" does not let other.test reach 127.0.0.1:8081.
func (rs *Rules) Names(addr netip.Addr, port int) bool {
	addr = addr.Unmap()
	for _, r := range rs.Allow {
		if r.ipLiteral && r.addr == addr && r.matchesPort(port) {
			return true
		}
	}
	return false
}

// URL decides a connection the server itself would make to rawURL (an upstream's), by its
// scheme, host, port and path; it does not resolve the name.
func (rs *Rules) URL(rawURL string) Decision {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return Decision{Reason: ReasonBadRequest}
	}
	port := defaultPort(u.Scheme)
	if p := u.Port(); p != "" {
		if port, err = parsePort(p); err != nil {
			return Decision{Reason: ReasonBadRequest}
		}
	}
	path, err := CleanPath(u.EscapedPath())
	if err != nil {
		return Decision{Reason: ReasonBadRequest}
	}
	d := rs.Request(u.Scheme, u.Hostname(), port, "POST", path)
	if !d.Allowed() && d.Reason != ReasonDenied {
		// A GET names the same place: an upstream's first request may be either.
		if g := rs.Request(u.Scheme, u.Hostname(), port, "GET", path); g.Allowed() {
			return g
		}
	}
	return d
}

func canonicalHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	return host
}

// Public reports whether a is an address a name may resolve to without a rule naming it: not
// loopback, private (RFC 1918, unique-local), link-local (the cloud metadata services live
// there), carrier-grade NAT, unspecified, multicast or otherwise reserved. An IPv6 address
// that carries an IPv4 one (IPv4-mapped ::ffff:0:0/96, IPv4-translated ::ffff:0:0:0/96,
// IPv4-compatible ::/96, 6to4 2002::/16) is judged by the IPv4 address inside: a host that
// routes it reaches that address.
func Public(a netip.Addr) bool {
	if v4, ok := embeddedIPv4(a); ok {
		a = v4
	}
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// embeddedIPv4 is the IPv4 address an IPv6 address carries by one of the forms Public names.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	var v4 [4]byte
	switch {
	case [12]byte(b[:12]) == [12]byte{10: 0xff, 11: 0xff}, // ::ffff:a.b.c.d, mapped
		[12]byte(b[:12]) == [12]byte{8: 0xff, 9: 0xff}, // ::ffff:0:a.b.c.d, translated
		[12]byte(b[:12]) == [12]byte{}:                 // ::a.b.c.d, compatible (:: and ::1 are 0.0.0.0 and 0.0.0.1: reserved)
		copy(v4[:], b[12:])
	case b[0] == 0x20 && b[1] == 0x02: // 2002:AABB:CCDD::/48, 6to4
		copy(v4[:], b[2:6])
	default:
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(v4), true
}

var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fd00:ec2::/32"),  // a cloud's metadata over IPv6 (inside fc00::/7 already)
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64 may lead to any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215), likewise
	netip.MustParsePrefix("2001::/32"),      // Teredo, whose addresses carry IPv4 ones obfuscated
	netip.MustParsePrefix("2001:db8::/32"),
}
