package assembly

import (
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/egress"
)

// defaultEgressMaxBytes bounds a program's traffic through the proxy when the profile's
// network block names no max_bytes.
const defaultEgressMaxBytes = 64 << 20

// egressPolicy is the egress proxy's policy for a profile's network block, or nil without
// one. Credentials are read at each request (configs.Credential.Resolve), never kept.
func (e Env) egressPolicy(p configs.Profile) (*egress.Policy, error) {
	n := p.Network
	if n == nil {
		return nil, nil
	}
	rs, err := egress.ParseRules(n.Allow, n.Deny)
	if err != nil {
		return nil, err
	}
	pol := &egress.Policy{Rules: rs, MaxBytes: defaultEgressMaxBytes}
	if n.MaxBytes != nil {
		pol.MaxBytes = int64(*n.MaxBytes)
	}
	for _, c := range n.Credentials {
		ref := c.Value
		pol.Credentials = append(pol.Credentials, egress.Credential{Host: c.Host, Header: c.Header,
			Value: func() (string, error) { return e.resolve(ref) }})
	}
	return pol, nil
}
