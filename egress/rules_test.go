package egress

import (
	"net/netip"
	"testing"
)

func TestRules(t *testing.T) {
	rs, err := ParseRules(
		[]string{"api.example.com", "*.pypi.org", "127.0.0.1:8080", "http://h.example/v1/ GET,POST", "[::1]:9000"},
		[]string{"bad.pypi.org", "http://h.example/v1/admin"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		scheme, host string
		port         int
		method, path string
		want         string
	}{
		{"https", "api.example.com", 443, "GET", "/", ""},
		{"http", "API.example.com.", 80, "GET", "/", ""},
		{"https", "api.example.com", 8443, "GET", "/", ReasonNotAllowed},
		{"https", "files.pypi.org", 443, "GET", "/", ""},
		{"https", "pypi.org", 443, "GET", "/", ReasonNotAllowed},
		{"https", "bad.pypi.org", 443, "GET", "/", ReasonDenied},
		{"http", "127.0.0.1", 8080, "GET", "/", ""},
		{"http", "127.0.0.2", 8080, "GET", "/", ReasonIPLiteral},
		{"http", "::1", 9000, "GET", "/", ""},
		{"http", "h.example", 80, "GET", "/v1/x", ""},
		{"http", "h.example", 80, "DELETE", "/v1/x", ReasonNotAllowed},
		{"http", "h.example", 80, "GET", "/v2", ReasonNotAllowed},
		{"http", "h.example", 80, "GET", "/v1/admin/x", ReasonDenied},
		{"https", "h.example", 443, "GET", "/v1/x", ReasonNotAllowed},
	}
	for _, c := range cases {
		if got := rs.Request(c.scheme, c.host, c.port, c.method, c.path); got.Reason != c.want {
			t.Errorf("%s %s://%s:%d%s: %q (rule %q), want %q", c.method, c.scheme, c.host, c.port, c.path, got.Reason, got.Rule, c.want)
		}
	}
	for _, bad := range []string{"", "a b", "http://x/ G3T", "*.", "ftp://x/", "h:0", "h:70000", "http://u:p@h/"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted it", bad)
		}
	}
	if d := rs.URL("https://api.example.com/mcp"); !d.Allowed() {
		t.Errorf("URL allowed: %+v", d)
	}
	if d := rs.URL("https://evil.example.org/mcp"); d.Allowed() {
		t.Errorf("URL refused: %+v", d)
	}
}

// Issue 38: an IPv6 address carrying an IPv4 one is judged by the IPv4 address inside.
func TestPublicJudgesEmbeddedIPv4(t *testing.T) {
	for s, want := range map[string]bool{
		"8.8.8.8": true, "2606:4700::1111": true, "10.0.0.1": false, "127.0.0.1": false, "169.254.169.254": false,
		"::ffff:10.0.0.1": false, "::ffff:8.8.8.8": true, // mapped
		"::ffff:0:10.0.0.1": false, "::ffff:0:8.8.8.8": true, // translated
		"::10.0.0.1": false, "::169.254.169.254": false, "::8.8.8.8": true, "::": false, "::1": false, // compatible
		"2002:a00:1::1": false, "2002:a9fe:a9fe::": false, "2002:7f00:1::": false, "2002:808:808::1": true, // 6to4
		"64:ff9b::8.8.8.8": false, "64:ff9b:1::1": false, "2001:0:4136:e378::1": false, // NAT64, Teredo
		"fd00:ec2::254": false, "fe80::1": false,
	} {
		if got := Public(netip.MustParseAddr(s)); got != want {
			t.Errorf("Public(%s) = %v, want %v", s, got, want)
		}
	}
}

// Issue 38, S2: an IP rule admits its address on its own port only.
func TestNamesBindsThePort(t *testing.T) {
	rs, err := ParseRules([]string{"127.0.0.1:18080", "other.test:18081", "[::1]"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo, lo6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	for _, c := range []struct {
		a    netip.Addr
		port int
		want bool
	}{{lo, 18080, true}, {lo, 18081, false}, {netip.MustParseAddr("::ffff:127.0.0.1"), 18080, true}, {lo6, 443, true}, {lo6, 80, true}, {lo6, 18081, false}} {
		if got := rs.Names(c.a, c.port); got != c.want {
			t.Errorf("Names(%s, %d) = %v, want %v", c.a, c.port, got, c.want)
		}
	}
}
