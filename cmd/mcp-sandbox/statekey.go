package main

import (
	"log/slog"
	"os"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

// stateKeys reads approvals.state_key (docs/design.md §10): the keys that seal the
// requestState of an approval asked through input requests, the first sealing and all
// opening. Without one the server makes a random key and says what that costs: a retry
// reaching it after a restart, or reaching another replica, is refused.
func stateKeys(cfg *configs.Config) (*mcpserver.StateKeys, error) {
	refs := cfg.Approvals.StateKey
	if len(refs) == 0 {
		slog.Info("approvals.state_key is not set: approval states are sealed with a random key of this process, so a retry survives no restart and no other replica can open it")
		return mcpserver.RandomStateKeys(), nil
	}
	var keys [][]byte
	for i, ref := range refs {
		s, err := ref.Resolve(os.LookupEnv, os.ReadFile)
		if err != nil {
			return nil, usagef("approvals.state_key[%d]: %v", i, err)
		}
		k, err := mcpserver.DecodeStateKey(s)
		if err != nil {
			return nil, usagef("approvals.state_key[%d] (%s): %v", i, ref, err)
		}
		keys = append(keys, k)
	}
	return mcpserver.NewStateKeys(keys...)
}
