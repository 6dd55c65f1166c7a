package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// Blob retention: a kept output or large result lives DefaultBlobRetention after it was
// written (serve --blob-retention changes it); the sweeper looks every blobSweepInterval.
const (
	DefaultBlobRetention = 7 * 24 * time.Hour
	blobSweepInterval    = time.Hour
)

// storage is the run ledger and the blob store of a serving process.
type storage struct {
	ledger *budget.SQLite
	blobs  outputs.BlobStore // nil: no data dir, so no blob store
	tmp    string            // a private ledger dir to remove at close, when there is no data dir
}

// openStorage opens the ledger and blob store under the config's data dir (data_dir, default
// configs.DefaultDataDir) and recovers calls a previous process left in flight: each becomes
// unknown, is logged, stays counted and is never replayed.
//
// With data_dir "-" (or no HOME to default it from) there is no blob store, and the ledger is
// a private one removed at exit: budgets are still metered, per execution and per Run, but do
// not survive a restart. preserve: required then refuses to start.
func openStorage(ctx context.Context, cfg *configs.Config) (*storage, error) {
	dir := cfg.DataDir
	if dir == "" {
		dir = configs.DefaultDataDir(os.Getenv)
	}
	st := &storage{}
	if dir == "" || dir == configs.NoDataDir {
		for _, name := range sortedKeys(cfg.Profiles) {
			if cfg.Profiles[name].Output.Preserve == configs.PreserveRequired {
				return nil, usagef("profile %q: output.preserve is %q, which needs a blob store, and there is no data_dir (set data_dir, or HOME/XDG_STATE_HOME for the default)",
					name, configs.PreserveRequired)
			}
		}
		tmp, err := os.MkdirTemp("", "mcp-sandbox-ledger-")
		if err != nil {
			return nil, fmt.Errorf("private run ledger: %w", err)
		}
		st.tmp, dir = tmp, tmp
		slog.Warn("no data_dir: the run ledger is private to this process and there is no blob store; outputs are previews only")
	}
	led, err := budget.OpenSQLite(ctx, dir, nil)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("data_dir %s: %w", dir, err)
	}
	st.ledger = led
	if st.tmp == "" {
		blobs, err := outputs.OpenFileStore(filepath.Join(dir, "blobs"))
		if err != nil {
			st.close()
			return nil, fmt.Errorf("data_dir %s: %w", dir, err)
		}
		st.blobs = blobs
	}
	lost, err := led.Recover(ctx)
	for _, c := range lost {
		slog.Warn("tool call recorded unknown: the server stopped while it was in flight; it stays counted and is not replayed",
			"call", c.ID, "tenant", c.Run.Tenant, "run", c.Run.ID, "execution", c.ExecutionID, "tool", c.Tool)
	}
	if err != nil {
		st.close()
		return nil, fmt.Errorf("data_dir %s: recovering the run ledger: %w", dir, err)
	}
	slog.Info("run ledger open", "data_dir", dir, "blob_store", st.blobs != nil, "recovered_unknown", len(lost))
	return st, nil
}

// sweep removes blobs older than retention until ctx ends; it returns at once without a store.
func (st *storage) sweep(ctx context.Context, retention time.Duration) {
	if st.blobs == nil {
		return
	}
	outputs.RunSweeper(ctx, st.blobs, min(blobSweepInterval, retention), retention, func(err error) {
		slog.Warn("blob sweep failed", "err", err)
	})
}

func (st *storage) close() {
	if st.ledger != nil {
		st.ledger.Close()
	}
	if st.tmp != "" {
		os.RemoveAll(st.tmp)
	}
}

// bindingBudget converts a config binding budget; unset fields are zero (no ceiling from it).
func bindingBudget(b configs.BindingBudget) budget.Limits {
	var l budget.Limits
	if b.MaxCalls != nil {
		l.MaxCalls = *b.MaxCalls
	}
	set := func(dst *int64, v *configs.ByteSize) {
		if v != nil {
			*dst = int64(*v)
		}
	}
	set(&l.MaxTotalBytes, b.MaxTotalBytes)
	set(&l.MaxProducedBytes, b.MaxProducedBytes)
	set(&l.MaxPreservedBytes, b.MaxPreservedBytes)
	set(&l.MaxArgumentBytes, b.MaxArgumentBytes)
	set(&l.MaxResultBytes, b.MaxResultBytes)
	return l
}
