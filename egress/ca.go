package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sync"
	"time"
)

// CA is a certificate authority minted for one execution: the sandbox trusts its certificate
// (and only it), and the proxy signs a leaf for each name the program reaches through it. Its
// key never leaves the host process.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu     sync.Mutex // guards leaves
	leaves map[string]*tls.Certificate
}

// NewCA mints a CA valid from an hour ago (clock skew) for a day: an execution is far shorter.
func NewCA() (*CA, error) {
	key, tmpl, err := newTemplate(pkix.Name{CommonName: "mcp-sandbox execution CA", Organization: []string{"mcp-sandbox"}})
	if err != nil {
		return nil, err
	}
	tmpl.NotAfter = tmpl.NotBefore.Add(time.Hour + 24*time.Hour) // a day from now
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid, tmpl.IsCA, tmpl.MaxPathLenZero = true, true, true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: map[string]*tls.Certificate{}}, nil
}

// PEM is the CA's certificate, for the sandbox's trust store.
func (ca *CA) PEM() []byte { return append([]byte(nil), ca.pem...) }

// Certificate is the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Leaf returns a certificate for host (a name, or an address) signed by ca, minted once.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[host]; c != nil {
		return c, nil
	}
	key, tmpl, err := newTemplate(pkix.Name{CommonName: host})
	if err != nil {
		return nil, err
	}
	tmpl.NotAfter = ca.cert.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	ca.leaves[host] = c
	return c, nil
}

// newTemplate makes a P-256 key and the start of a certificate for subject: a fresh serial,
// valid from an hour ago (clock skew).
func newTemplate(subject pkix.Name) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return key, &x509.Certificate{SerialNumber: serial(), Subject: subject, NotBefore: time.Now().Add(-time.Hour)}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
