package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/postgres"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// pgConfig is one tenant's agent with its ledger and blobs on PostgreSQL (the DSN in the
// environment variable MCPS_TEST_DSN) and no data dir at all.
const pgConfig = `
data_dir: "-"
ledger: {postgres: {dsn: {env: MCPS_TEST_DSN}, lease_seconds: 2}}
blobs: {postgres: {dsn: {env: MCPS_TEST_DSN}}}
profiles:
  default:
    backend: local
    isolation: process
    allow_same_uid: true
    output: {preview_bytes: 1000, preserve: required}
tenants:
  t1:
    agents:
      a: {code_execution: {}}
`

// TestServeStorageOnPostgres: a server whose ledger and blobs are on PostgreSQL records its
// execution there and keeps a large stdout under a handle that a second server process (a
// replica) reads back.
func TestServeStorageOnPostgres(t *testing.T) {
	dsn := pgtest.Schema(t)
	t.Setenv("MCPS_TEST_DSN", dsn)
	cfg := testkit.WriteConfig(t, pgConfig)
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(60*time.Second))
	defer cancel()

	one, log := connectStdioLog(t, []string{"--config", cfg}, nil)
	res, _ := runCode(t, ctx, one, "for i in range(2000):\n    print('line', i)", nil)
	var out struct {
		Attachments []struct {
			Name, Handle, Location string
		} `json:"attachments"`
	}
	b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
	if err := json.Unmarshal(b, &out); err != nil || res.IsError {
		t.Fatalf("run_code: %v %s", err, b)
	}
	var handle string
	for _, a := range out.Attachments {
		if a.Name == "stdout" && a.Location == "blob" {
			handle = a.Handle
		}
	}
	if handle == "" {
		t.Fatalf("stdout was not kept under a handle: %s", b)
	}
	if !strings.Contains(log.String(), "ledger=postgres") || !strings.Contains(log.String(), "blobs=postgres") {
		t.Errorf("the log does not say which stores are in use:\n%s", log)
	}

	two := connectStdio(t, []string{"--config", cfg}, nil)
	rr, err := two.CallTool(ctx, &mcp.CallToolParams{Name: "read_tool_output", Arguments: map[string]any{"handle": handle, "offset": 1500, "limit": 2}})
	if err != nil || rr.IsError || testkit.Text(rr) != "line 1500\nline 1501\n" {
		t.Fatalf("read_tool_output through the second server: %v %v %q", err, rr.IsError, testkit.Text(rr))
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var execs, leases int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM ledger_executions WHERE tenant = 't1' AND status = 'completed'),
		(SELECT count(*) FROM ledger_leases)`).Scan(&execs, &leases); err != nil {
		t.Fatal(err)
	}
	if execs != 1 || leases != 2 {
		t.Errorf("ledger holds %d completed executions and %d leases; want 1 and 2 (one per server)", execs, leases)
	}
}

// TestServeRecoversAnotherReplicasCalls: a running server (not only one starting) records
// unknown the call a replica that has gone left in flight, and logs it.
func TestServeRecoversAnotherReplicasCalls(t *testing.T) {
	dsn := pgtest.Schema(t)
	t.Setenv("MCPS_TEST_DSN", dsn)
	cs, log := connectStdioLog(t, []string{"--config", testkit.WriteConfig(t, pgConfig)}, nil)
	_ = toolNames(t, cs) // serving: startup recovery is behind it
	ctx := t.Context()
	gone, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := budget.RunRef{Tenant: "t1", ID: "r"}
	if _, err := gone.StartExecution(ctx, run, "x_gone", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.StartCall(ctx, budget.CallStart{ID: "c_gone", Run: run, ExecutionID: "x_gone", Tool: "srv__slow"}, budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	gone.Close() // its lease is given up; its call is still started
	deadline := time.Now().Add(gate.Scaled(30 * time.Second))
	for !strings.Contains(log.String(), "call=c_gone") {
		if time.Now().After(deadline) {
			t.Fatalf("the server never recorded the gone replica's call:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(log.String(), "recorded unknown") || !strings.Contains(log.String(), "unknown_total=1") {
		t.Errorf("log: %s", log)
	}
}

// TestServeStorageUnreachable: a server whose PostgreSQL does not answer refuses to start
// with an error that names the ledger, the DSN's reference and the cause, and carries neither
// the DSN nor its password; a DSN variable that is not set is a config error naming it.
func TestServeStorageUnreachable(t *testing.T) {
	const password = "pw-Nobody-Should-See"
	dsn := "postgres://u:" + password + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=3"
	t.Setenv("MCPS_TEST_DSN", dsn)
	cfg := testkit.WriteConfig(t, pgConfig)
	start := time.Now()
	stdout, stderr, code := runCLI(t, "", "serve", "--config", cfg)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("took %v to give up", time.Since(start))
	}
	for _, want := range []string{"ledger: PostgreSQL (dsn env:MCPS_TEST_DSN)", "cannot connect", "connection refused"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr+stdout, password) || strings.Contains(stderr+stdout, "127.0.0.1:1/db") {
		t.Errorf("the DSN leaked:\n%s", stderr)
	}

	t.Setenv("MCPS_TEST_DSN", "")
	_, stderr, code = runCLI(t, "", "serve", "--config", cfg)
	if code != exitUsage || !strings.Contains(stderr, "ledger.postgres.dsn") || !strings.Contains(stderr, "MCPS_TEST_DSN") {
		t.Errorf("unset DSN: exit %d\n%s", code, stderr)
	}
}

// TestDoctorStorage: doctor names the stores in use, by reference, and says whether
// PostgreSQL answers; a store that does not is a store not ready (exit 1), its problem
// reported without the DSN.
func TestDoctorStorage(t *testing.T) {
	type report struct {
		Storage struct {
			Ledger, Blobs struct { // what doctor --json says of a store
				Kind, Location, Problem string
				Ready                   bool
			}
		} `json:"storage"`
	}
	doctor := func(dsn string) (report, string, int) {
		t.Setenv("MCPS_TEST_DSN", dsn)
		out, stderr, code := runCLI(t, "", "doctor", "--json", "--config", testkit.WriteConfig(t, pgConfig))
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("doctor --json: %v\n%s\n%s", err, out, stderr)
		}
		return r, out, code
	}
	const password = "pw-Nobody-Should-See"
	r, out, code := doctor("postgres://u:" + password + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=3")
	if code != exitFailure || r.Storage.Ledger.Ready || r.Storage.Blobs.Ready || r.Storage.Ledger.Kind != "postgres" ||
		r.Storage.Ledger.Location != "dsn env:MCPS_TEST_DSN" || !strings.Contains(r.Storage.Ledger.Problem, "cannot connect") {
		t.Errorf("doctor with PostgreSQL down: exit %d, %+v", code, r.Storage)
	}
	if strings.Contains(out, password) {
		t.Errorf("doctor printed the password:\n%s", out)
	}

	dsn := pgtest.Schema(t)
	r, out, _ = doctor(dsn)
	if !r.Storage.Ledger.Ready || !r.Storage.Blobs.Ready || r.Storage.Blobs.Kind != "postgres" {
		t.Errorf("doctor with PostgreSQL up: %+v", r.Storage)
	}
	if strings.Contains(out, dsn) {
		t.Errorf("doctor printed the DSN:\n%s", out)
	}
}
