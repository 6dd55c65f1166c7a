package pgdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open parses dsn (a URL postgres://… or key=value pairs, as libpq takes them; pool_max_conns
// and the other pgxpool parameters apply), connects and pings. No error it returns contains
// the DSN or its password: a DSN that does not parse is reported without its text, and a
// connection error has both scrubbed out of it.
func Open(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's own text quotes the DSN with the password masked on a best-effort basis,
		// and a url.Error inside it quotes the URL whole: neither is used.
		return nil, errors.New("the DSN does not parse as a PostgreSQL connection string (a URL postgres://… or key=value pairs)")
	}
	secrets := []string{dsn, cfg.ConnConfig.Password}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, Scrub(err, secrets...)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, Scrub(fmt.Errorf("cannot connect: %w", err), secrets...)
	}
	return pool, nil
}

// Scrub returns err with every non-empty secret replaced by "[redacted]" in its text. The
// result still unwraps to err, for errors.Is; its own text is what logs and users see.
func Scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return &scrubbed{msg: msg, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// Retryable reports whether err is a deadlock or a serialization failure: the statement was
// rolled back whole and may be run again.
func Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// migrationsTable records, per component, the schema versions applied.
const migrationsTable = `CREATE TABLE IF NOT EXISTS mcp_sandbox_migrations (
	component  text        NOT NULL,
	version    integer     NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (component, version)
)`

// Migrate brings component's schema to len(steps), applying the missing steps in one
// transaction under an advisory lock (see the package doc). It returns the version found
// before, which is more than len(steps) when a newer binary has migrated further.
func Migrate(ctx context.Context, pool *pgxpool.Pool, component string, steps []string) (found int, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('mcp-sandbox migrations ' || coalesce(current_schema(), ''), 0))`); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, migrationsTable); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM mcp_sandbox_migrations WHERE component = $1`, component).Scan(&found); err != nil {
			return err
		}
		for v := found + 1; v <= len(steps); v++ {
			if _, err := tx.Exec(ctx, steps[v-1]); err != nil {
				return fmt.Errorf("%s schema version %d: %w", component, v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO mcp_sandbox_migrations (component, version) VALUES ($1, $2)`, component, v); err != nil {
				return err
			}
		}
		return nil
	})
	return found, err
}
