package egresstest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
)

// Origin is an HTTPS server on 127.0.0.1, serving with a leaf for 127.0.0.1 signed by CA.
type Origin struct {
	CA   *egress.CA
	Port int
}

// NewOrigin starts an Origin serving h, closed when the test ends.
func NewOrigin(t testing.TB, h http.Handler) *Origin {
	t.Helper()
	ca, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &Origin{CA: ca, Port: srv.Listener.Addr().(*net.TCPAddr).Port}
}

// Addr is the origin's host:port, as a network rule names it.
func (o *Origin) Addr() string { return fmt.Sprintf("127.0.0.1:%d", o.Port) }

// Rules is the network rules that allow the origin and nothing else.
func (o *Origin) Rules(t testing.TB) *egress.Rules {
	t.Helper()
	rules, err := egress.ParseRules([]string{o.Addr()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// Roots is a pool holding only the origin's CA: the roots the proxy re-encrypts to it with.
func (o *Origin) Roots() *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AddCert(o.CA.Certificate())
	return roots
}

// RootsFile writes the origin's CA as PEM into the test's temporary directory and returns
// its path, for SSL_CERT_FILE.
func (o *Origin) RootsFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: o.CA.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
