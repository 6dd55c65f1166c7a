package assembly

import (
	"log/slog"

	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

// stateKeys reads approvals.state_key (docs/design.md §10): the keys that seal the
// requestState of an approval asked through input requests, the first sealing and all
// opening. Without one the server makes a random key and says what that costs where it
// costs something (stateKeyMissing).
func stateKeys(cfg *Config) (*mcpserver.StateKeys, error) {
	refs := cfg.Approvals.StateKey
	if len(refs) == 0 {
		stateKeyMissing(cfg)
		return mcpserver.RandomStateKeys(), nil
	}
	var keys [][]byte
	for i, ref := range refs {
		s, err := cfg.resolve(ref)
		if err != nil {
			return nil, configErrorf("approvals.state_key[%d]: %v", i, err)
		}
		k, err := mcpserver.DecodeStateKey(s)
		if err != nil {
			return nil, configErrorf("approvals.state_key[%d] (%s): %v", i, ref, err)
		}
		keys = append(keys, k)
	}
	return mcpserver.NewStateKeys(keys...)
}

// stateKeyMissing logs what a random state key costs, only where it costs something: an
// approval can be asked only of a tenant granted upstreams, and its retry outlives this
// process only on a ledger that does. On a shared (PostgreSQL) ledger, several replicas: a
// retry reaching another one is refused (a warning). On a data_dir: a program paused on an
// approval does not survive a restart (info). Otherwise (the embedded default, data_dir "-")
// nothing is lost, and nothing is said above debug.
func stateKeyMissing(cfg *Config) {
	askable := false
	for _, t := range cfg.Tenants {
		askable = askable || len(t.Upstreams) > 0
	}
	switch {
	case askable && cfg.Ledger != nil && cfg.Ledger.Postgres != nil:
		slog.Warn("approvals.state_key is not set: approval states are sealed with a random key of this process, " +
			"so another replica cannot open a retry and a program paused on an approval survives no restart; set it on every replica")
	case askable && dataDir(cfg) != "":
		slog.Info("approvals.state_key is not set: a program paused on an approval survives no restart of this server")
	default:
		slog.Debug("approvals.state_key is not set: approval states are sealed with a random key of this process")
	}
}
