package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// DSNEnv names the environment variable holding the test database's DSN.
const DSNEnv = "MCP_SANDBOX_TEST_PG_DSN"

// Capability is the gate's name for a reachable PostgreSQL.
const Capability = "postgres"

// Schema creates a fresh schema in the test database, drops it when t ends, and returns a DSN
// whose search_path is that schema, so whatever the test opens with it starts empty and sees
// no other test's tables.
func Schema(t testing.TB) string {
	t.Helper()
	base := os.Getenv(DSNEnv)
	gate.Require(t, Capability, base != "", DSNEnv+" is not set (e.g. postgres://user:pass@127.0.0.1:5432/db?sslmode=disable)")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	gate.Require(t, Capability, err == nil, "cannot connect to the database "+DSNEnv+" names: "+errText(err))
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { Drop(t, base, name) })
	return WithSearchPath(base, name)
}

// Drop removes schema name and everything in it.
func Drop(t testing.TB, dsn, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("drop schema %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", name, err)
	}
}

// WithSearchPath returns dsn with its search_path set to schema.
func WithSearchPath(dsn, schema string) string { return WithParam(dsn, "search_path", schema) }

// WithParam returns dsn with the parameter key set to value: a query parameter for a URL, a
// key=value pair otherwise. pgx sends a parameter it does not know itself as a session setting.
func WithParam(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
