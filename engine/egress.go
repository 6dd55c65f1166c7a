package engine

import (
	"net"
	"strconv"
)

// EgressLaunch is what a backend needs to start a child under network rules.
type EgressLaunch struct {
	// CAPEM is the execution's CA certificate: the child's trust store holds it (and only it),
	// at EgressCAPath.
	CAPEM []byte
}

// EgressPort is the loopback port of the child's network namespace the egress proxy listens
// on; the namespace is the child's own, so any port would do, and a fixed one lets the
// environment be known before the child starts.
const EgressPort = 3128

// EgressCAPath is where the child finds the execution's CA certificate.
const EgressCAPath = "/etc/mcp-sandbox/egress-ca.pem"

// EgressEnv is the environment a child under network rules gets besides the usual: the proxy
// for every client that reads the conventional variables, and the trust store for OpenSSL
// (Python's ssl), requests and curl.
func EgressEnv() map[string]string {
	proxy := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	return map[string]string{
		"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
		"SSL_CERT_FILE": EgressCAPath, "REQUESTS_CA_BUNDLE": EgressCAPath, "CURL_CA_BUNDLE": EgressCAPath,
	}
}

// EgressEnvNames are EgressEnv's names, which the environment grade accepts under rules.
var EgressEnvNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "SSL_CERT_FILE",
	"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}

// EgressBackend is a Backend that can start children under network rules (LaunchSpec.Egress):
// the Runner refuses rules on any other, rather than run a program with more network than its
// terms.
type EgressBackend interface {
	Backend
	EgressByRules() bool
}

// CommandBackend is a Backend that can run LaunchSpec.Command, contained as a program is.
type CommandBackend interface {
	Backend
	RunsCommands() bool
}

// EgressChild is a child started with LaunchSpec.Egress: EgressListener accepts the
// connections made to 127.0.0.1:EgressPort inside its network namespace, the one route out
// it has. The Runner serves the execution's proxy on it; the child's Close closes it.
type EgressChild interface {
	Child
	EgressListener() net.Listener
}
