package pgdb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestOpenErrorsKeepTheDSNSecret: neither a DSN that does not parse nor a server that does not
// answer puts the DSN or its password in the error.
func TestOpenErrorsKeepTheDSNSecret(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	tests := []struct{ name, dsn, want string }{
		{"bad url", "postgres://u:" + secret + "@127.0.0.1:notaport/db", "does not parse"},
		{"bad pairs", "host=127.0.0.1 password=" + secret + " port=x", "does not parse"},
		{"unreachable url", "postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", "cannot connect"},
		{"unreachable pairs", "host=127.0.0.1 port=1 user=u password=" + secret + " sslmode=disable connect_timeout=2", "cannot connect"},
	}
	for _, tc := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(10*time.Second))
		pool, err := Open(ctx, tc.dsn)
		cancel()
		if err == nil {
			pool.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, secret) || strings.Contains(msg, tc.dsn) {
			t.Errorf("%s: error carries the secret: %s", tc.name, msg)
		}
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.name, msg, tc.want)
		}
	}
}

func TestScrub(t *testing.T) {
	inner := errors.New("connect to postgres://u:pw@h/db failed: pw rejected")
	err := Scrub(inner, "postgres://u:pw@h/db", "pw", "")
	if got := err.Error(); got != "connect to [redacted] failed: [redacted] rejected" {
		t.Errorf("Scrub = %q", got)
	}
	if !errors.Is(err, inner) {
		t.Error("a scrubbed error no longer unwraps to its cause")
	}
	if Scrub(nil, "x") != nil {
		t.Error("Scrub(nil) is not nil")
	}
}
