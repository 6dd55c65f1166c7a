package execution

import "github.com/mcp-sandbox/mcp-sandbox/budget"

// MaxRunNameBytes bounds a Run name a caller gives.
const MaxRunNameBytes = 256

// NamedRun is the Run a caller names: an MCP host in _meta "mcp-sandbox/run", a shell user
// with `run --run NAME`. The same name is the same Run of the tenant, whichever way it came,
// and a prefix keeps named Runs apart from session, request and one-shot ones. ok is false
// for an empty name or one over MaxRunNameBytes.
func NamedRun(tenant, name string) (run budget.RunRef, ok bool) {
	if name == "" || len(name) > MaxRunNameBytes {
		return budget.RunRef{}, false
	}
	return budget.RunRef{Tenant: tenant, ID: "named:" + name}, true
}
