package assembly

import (
	"log/slog"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/remote"
)

// openRemote builds the remote backend of a profile: its service's URL, its credential (a
// reference resolved fresh for every request and never kept), and the profile's caps, which
// narrow what the service is asked for and bound what it may send back.
func (e Env) openRemote(name string, p configs.Profile, level engine.Level) (*remote.Sandbox, error) {
	r := p.Remote // Validate requires it for backend remote
	if r == nil {
		r = &configs.Remote{}
	}
	opts := remote.Options{
		URL:               r.URL,
		AllowInsecureHTTP: r.AllowInsecureHTTP,
		Ceiling:           engineLimits(p.HardLimits, engine.Limits{}),
		Isolation:         level,
		AllowNetwork:      p.AllowNetwork,
		MaxOutputBytes:    int64(deref(p.Output.MaxBytes)),
		PreviewBytes:      int64(deref(p.Output.PreviewBytes)),
		Artifacts:         artifactPolicy(p),
		Logger:            slog.Default().With("profile", name),
		Bearer:            e.bearerOf(r.Bearer),
	}
	// A stream carries both output streams and the artifacts as base64, and every call's
	// arguments: its ceiling follows the profile's, never below the default.
	b := bindingBudget(p.BindingBudget)
	need := (2*opts.MaxOutputBytes+opts.Artifacts.MaxBytes)*4/3 + int64(b.MaxCalls)*(b.MaxArgumentBytes+4<<10) + 16<<20
	opts.Bounds.MaxStream = max(need, remote.DefaultMaxStream)
	return remote.New(&opts)
}
