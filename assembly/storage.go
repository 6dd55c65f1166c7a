package assembly

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/postgres"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/outputs/pgblob"
)

// Blob retention: a kept output or large result lives DefaultBlobRetention after it was
// written (serve --blob-retention changes it); the sweeper looks every blobSweepInterval.
const (
	DefaultBlobRetention = 7 * 24 * time.Hour
	blobSweepInterval    = time.Hour
)

// How often a serving process looks for calls a dead owner left in flight: a SQLite ledger is
// shared by processes on one machine, and a PostgreSQL one by replicas, any of which may die
// while the others run on. For PostgreSQL it is a quarter of the lease, so a dead replica's
// calls are recorded unknown within about a lease and a quarter.
const sqliteRecoveryInterval = time.Minute

// connectTimeout bounds connecting to PostgreSQL (and migrating) at startup and in doctor.
const connectTimeout = 20 * time.Second

// Storage is the run ledger and the blob store of a serving process.
type Storage struct {
	Ledger budget.Ledger
	Blobs  outputs.BlobStore // nil: no data dir and no shared store, so no blob store
	tmp    string            // a private ledger dir to remove at close, when there is no data dir
	report storageReport     // what is in use, for logs and doctor

	recoverEvery time.Duration
	closeBlobs   func()
	lost         atomic.Int64 // calls recorded unknown since this process started
}

// storeReport says which store is in use and where, never a secret: a DSN appears as its
// reference (env:NAME or file:PATH).
type storeReport struct {
	Kind     string `json:"kind"`     // sqlite | postgres for the ledger; files | postgres | none for blobs
	Location string `json:"location"` // a path, the DSN's reference, or what "none" means
	Ready    bool   `json:"ready"`
	Problem  string `json:"problem,omitempty"`
}

type storageReport struct {
	Ledger storeReport `json:"ledger"`
	Blobs  storeReport `json:"blobs"`
}

// dataDir is the config's data dir ("" when there is none: "-", or no HOME to default from).
func dataDir(cfg *Config) string {
	dir := cfg.DataDir
	if dir == "" {
		dir = configs.DefaultDataDir(cfg.getenv)
	}
	if dir == configs.NoDataDir {
		return ""
	}
	return dir
}

// plannedStorage says what OpenStorage will use for cfg, without opening anything.
func plannedStorage(cfg *Config) storageReport {
	dir := dataDir(cfg)
	var r storageReport
	switch {
	case cfg.Ledger != nil && cfg.Ledger.Postgres != nil:
		r.Ledger = storeReport{Kind: "postgres", Location: "dsn " + cfg.Ledger.Postgres.DSN.String()}
	case dir == "":
		r.Ledger = storeReport{Kind: "sqlite", Location: "private to each process, removed at exit (no data_dir)"}
	default:
		r.Ledger = storeReport{Kind: "sqlite", Location: filepath.Join(dir, sqlite.LedgerFile)}
	}
	switch {
	case cfg.Blobs != nil && cfg.Blobs.Postgres != nil:
		r.Blobs = storeReport{Kind: "postgres", Location: "dsn " + cfg.Blobs.Postgres.DSN.String()}
	case dir == "":
		r.Blobs = storeReport{Kind: "none", Location: "no data_dir: outputs are previews only"}
	default:
		r.Blobs = storeReport{Kind: "files", Location: filepath.Join(dir, "blobs")}
	}
	r.Ledger.Ready, r.Blobs.Ready = true, true
	return r
}

// resolveDSN reads a DSN reference; a failure is a config error naming the reference only.
func (e Env) resolveDSN(what string, ref configs.Credential) (string, error) {
	dsn, err := e.resolve(ref)
	if err != nil {
		return "", configErrorf("%s.postgres.dsn: %v", what, err)
	}
	return dsn, nil
}

// OpenStorage opens the ledger and the blob store the config names: by default, SQLite and
// files under the data dir (data_dir, default configs.DefaultDataDir); with ledger.postgres or
// blobs.postgres, PostgreSQL, migrated on open. It then recovers calls a dead owner left in
// flight: each becomes unknown, is logged, stays counted and is never replayed.
//
// With data_dir "-" (or no HOME to default it from) and no shared store there is no blob
// store, and a SQLite ledger is a private one removed at exit: budgets are still metered, per
// execution and per Run, but do not survive a restart. preserve: required then refuses to
// start. A DSN that cannot be read is a config error; a database that cannot be reached is an
// error naming the DSN's reference and the cause, never the DSN.
func OpenStorage(ctx context.Context, cfg *Config) (*Storage, error) {
	dir := dataDir(cfg)
	st := &Storage{report: plannedStorage(cfg), closeBlobs: func() {}}
	pgLedger := cfg.Ledger != nil && cfg.Ledger.Postgres != nil
	pgBlobs := cfg.Blobs != nil && cfg.Blobs.Postgres != nil
	if dir == "" && !pgBlobs {
		for _, name := range sortedKeys(cfg.Profiles) {
			if cfg.Profiles[name].Output.Preserve == configs.PreserveRequired {
				return nil, configErrorf("profile %q: output.preserve is %q, which needs a blob store, and there is no data_dir (set data_dir, or HOME/XDG_STATE_HOME for the default, or blobs.postgres)",
					name, configs.PreserveRequired)
			}
		}
	}
	if pgLedger {
		opts := &postgres.Options{}
		if s := cfg.Ledger.Postgres.LeaseSeconds; s != nil {
			opts.LeaseTTL = time.Duration(*s * float64(time.Second))
		}
		led, err := openPostgresLedger(ctx, cfg, opts)
		if err != nil {
			return nil, err
		}
		st.Ledger = led
		st.recoverEvery = max(led.LeaseTTL()/4, 250*time.Millisecond)
	} else {
		ldir := dir
		if ldir == "" {
			tmp, err := os.MkdirTemp("", "mcp-sandbox-ledger-")
			if err != nil {
				return nil, fmt.Errorf("private run ledger: %w", err)
			}
			st.tmp, ldir = tmp, tmp
			slog.Warn("no data_dir: the run ledger is private to this process")
		}
		led, err := sqlite.Open(ctx, ldir, nil)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("data_dir %s: %w", ldir, err)
		}
		st.Ledger = led
		st.recoverEvery = sqliteRecoveryInterval
	}
	blobs, closeBlobs, err := OpenBlobs(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	if blobs == nil {
		slog.Warn("no data_dir and no blobs.postgres: there is no blob store; outputs are previews only")
	}
	st.Blobs, st.closeBlobs = blobs, closeBlobs
	if st.Blobs != nil {
		st.Blobs = outputs.WithQuota(st.Blobs, storeQuota(cfg))
	}
	lost, err := st.Ledger.Recover(ctx)
	st.logLost(lost)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("ledger: recovering calls left in flight: %w", err)
	}
	slog.Info("storage open", "ledger", st.report.Ledger.Kind, "ledger_at", st.report.Ledger.Location,
		"blobs", st.report.Blobs.Kind, "blobs_at", st.report.Blobs.Location, "recovered_unknown", len(lost))
	return st, nil
}

// OpenBlobs opens the blob store the config names: PostgreSQL with blobs.postgres, else files
// under the data dir; nil (and a close that does nothing) when there is neither.
func OpenBlobs(ctx context.Context, cfg *Config) (outputs.BlobStore, func(), error) {
	if cfg.Blobs != nil && cfg.Blobs.Postgres != nil {
		dsn, err := cfg.resolveDSN("blobs", cfg.Blobs.Postgres.DSN)
		if err != nil {
			return nil, nil, err
		}
		octx, cancel := context.WithTimeout(ctx, connectTimeout)
		blobs, err := pgblob.Open(octx, dsn, nil)
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("blobs: PostgreSQL (dsn %s): %w", cfg.Blobs.Postgres.DSN.String(), err)
		}
		return blobs, blobs.Close, nil
	}
	dir := dataDir(cfg)
	if dir == "" {
		return nil, func() {}, nil
	}
	blobs, err := outputs.OpenFileStore(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, nil, fmt.Errorf("data_dir %s: %w", dir, err)
	}
	return blobs, func() {}, nil
}

func (st *Storage) logLost(lost []budget.CallRecord) {
	for _, c := range lost {
		n := st.lost.Add(1)
		slog.Warn("tool call recorded unknown: its owner stopped while it was in flight; it stays counted and is not replayed",
			"call", c.ID, "tenant", c.Run.Tenant, "run", c.Run.ID, "execution", c.ExecutionID, "tool", c.Tool,
			"unknown_total", n)
	}
}

// background runs, until ctx ends, the blob sweeper (blobs older than retention), the
// cassette and paused-call sweepers (older than kept, approvals.retention_hours) and the
// ledger's periodic recovery; the returned function stops them and waits for them.
func (st *Storage) background(ctx context.Context, retention, kept time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sweepCassettes(ctx, st.Ledger, kept, time.Now) })
	if st.Blobs != nil {
		wg.Go(func() {
			outputs.RunSweeper(ctx, st.Blobs, min(blobSweepInterval, retention), retention, func(err error) {
				slog.Warn("blob sweep failed", "err", err)
			})
		})
	}
	wg.Go(func() {
		budget.RunRecovery(ctx, st.Ledger, st.recoverEvery, func(lost []budget.CallRecord, err error) {
			st.logLost(lost)
			if err != nil {
				slog.Warn("ledger recovery pass failed", "err", err)
			}
		})
	})
	if kept > 0 {
		wg.Go(func() { sweepPauses(ctx, st.Ledger, kept) })
		wg.Go(func() { sweepTasks(ctx, st.Ledger, kept) })
	}
	return func() { cancel(); wg.Wait() }
}

// sweepPauses drops, until ctx ends, the paused calls asked longer than retention ago: their
// questions have long closed, and their journals are kept no longer.
func sweepPauses(ctx context.Context, p budget.Pauses, retention time.Duration) {
	everyUntilDone(ctx, min(pauseSweepInterval, retention), func() { approval.DropOldPauses(ctx, p, retention) })
}

// everyUntilDone runs pass at once and then every interval, until ctx ends: the loop of
// serve's ledger sweepers.
func everyUntilDone(ctx context.Context, interval time.Duration, pass func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pass()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepTasks drops, until ctx ends, the MCP tasks created longer than retention ago (a task's
// ttl is never longer, so none of them is still read: mcpserver's tasks).
func sweepTasks(ctx context.Context, t budget.Tasks, retention time.Duration) {
	everyUntilDone(ctx, min(pauseSweepInterval, retention), func() {
		if n, err := t.DropTasksBefore(ctx, time.Now().Add(-retention)); err != nil {
			slog.Warn("task sweep failed", "err", err)
		} else if n > 0 {
			slog.Info("tasks swept", "removed", n)
		}
	})
}

// pauseSweepInterval is how often the paused calls past their retention are dropped.
const pauseSweepInterval = time.Hour

func (st *Storage) Close() {
	if st.Ledger != nil {
		st.Ledger.Close()
	}
	st.closeBlobs()
	if st.tmp != "" {
		os.RemoveAll(st.tmp)
	}
}

// probeStorage is doctor's look at the stores: the plan, and for PostgreSQL whether the DSN
// can be read and the server answers (it connects and disconnects, and changes nothing).
func probeStorage(ctx context.Context, cfg *Config) storageReport {
	r := plannedStorage(cfg)
	probe := func(rep *storeReport, what string, ref configs.Credential) {
		dsn, err := cfg.resolveDSN(what, ref)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, connectTimeout)
			var pool interface{ Close() }
			pool, err = pgdb.Open(pctx, dsn)
			cancel()
			if err == nil {
				pool.Close()
			}
		}
		if err != nil {
			rep.Ready, rep.Problem = false, err.Error()
		}
	}
	if r.Ledger.Kind == "postgres" {
		probe(&r.Ledger, "ledger", cfg.Ledger.Postgres.DSN)
	}
	if r.Blobs.Kind == "postgres" {
		probe(&r.Blobs, "blobs", cfg.Blobs.Postgres.DSN)
	}
	return r
}

// storeQuota is the config's quotas on stored bytes: each tenant's (a tenant the config does
// not name gets the defaults) and the server's.
func storeQuota(cfg *Config) outputs.StoreQuota {
	tenants := map[string]int64{}
	for name := range cfg.Tenants {
		tenants[name] = int64(*cfg.TenantQuotas(name).MaxStoredBytes)
	}
	other := int64(*cfg.TenantQuotas("").MaxStoredBytes)
	return outputs.StoreQuota{
		Tenant: func(tenant string) int64 {
			if n, ok := tenants[tenant]; ok {
				return n
			}
			return other
		},
		Total: int64(*cfg.ServerQuotas().MaxStoredBytes),
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

// openPostgresLedger opens cfg's ledger.postgres (migrated on open), connecting within
// connectTimeout; a failure names the DSN's reference, never the DSN.
func openPostgresLedger(ctx context.Context, cfg *Config, opts *postgres.Options) (*postgres.Ledger, error) {
	dsn, err := cfg.resolveDSN("ledger", cfg.Ledger.Postgres.DSN)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	led, err := postgres.Open(octx, dsn, opts)
	if err != nil {
		return nil, fmt.Errorf("ledger: PostgreSQL (dsn %s): %w", cfg.Ledger.Postgres.DSN.String(), err)
	}
	return led, nil
}

// OpenSharedLedger opens the run ledger the config names, where the servers keep paused calls
// and saved programs: ledger.postgres, or the SQLite ledger under data_dir. Without either
// there is nothing shared to read.
func OpenSharedLedger(ctx context.Context, cfg *Config) (budget.Ledger, func(), error) {
	if cfg.Ledger != nil && cfg.Ledger.Postgres != nil {
		led, err := openPostgresLedger(ctx, cfg, nil)
		if err != nil {
			return nil, nil, err
		}
		return led, func() { led.Close() }, nil
	}
	dir := dataDir(cfg)
	if dir == "" {
		return nil, nil, configErrorf("there is no data_dir and no ledger.postgres, so each server's ledger is private to it and no approval can be read here")
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("data_dir %s: %w (has a server run with this config?)", dir, err)
	}
	led, err := sqlite.Open(ctx, dir, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("data_dir %s: %w", dir, err)
	}
	return led, func() { led.Close() }, nil
}

// HasLedger says whether cfg names a ledger that outlives a process: under data_dir, or on
// PostgreSQL (ledger.postgres).
func HasLedger(cfg *Config) bool {
	return dataDir(cfg) != "" || cfg.Ledger != nil && cfg.Ledger.Postgres != nil
}
