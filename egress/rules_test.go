package egress

import "testing"

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
