package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// exportBearer is the bearer token of an upstream in exportConfig (from the environment);
// exportField is the password of a URL the program sends in an argument, which redaction
// takes out (the mock's tools refuse any argument they do not declare, so a secret-looking
// key cannot be sent; a field redacted by its schema: cassette.TestRecorderRedacts). It is
// built at run time, so the program's text does not hold it either.
const (
	exportBearer = "export-bearer-0123456789abcdef"
	exportField  = "fld-424242"
)

// exportProgram calls the mock five times, sends the bearer token as an argument (so it comes
// back in the result too) and the field under a secret-looking key.
const exportProgram = `out = []
for a in (1, 2, 3, 4, 5):
    out.append(await mock__add(a=a, b=10))
tok = await mock__lookup(sku=%q)
key = "fld-" + str(6 * 7) * 3
rec = await call_tool("mock__create_record", {"title": "t", "body": "see https://ann:" + key + "@files.example/doc"})
return {"sums": out, "tok": tok, "rec": rec}`

// exportConfig records every execution (cassettes.record) in the ledger storage names: a
// data_dir of SQLite and files, or PostgreSQL for both.
func exportConfig(t *testing.T, storage, command string) string {
	return testkit.WriteConfig(t, fmt.Sprintf(`
%s
cassettes: {record: true}
profiles:
  default: {backend: process, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
upstreams:
  mock: {command: [%q]}
  web: {url: "http://127.0.0.1:9/mcp", bearer: {env: EXPORT_TEST_BEARER}}
tenants:
  t:
    upstreams: [mock]
    agents:
      a: {code_execution: {profile: default}}
`, storage, command))
}

// TestExportFromLedger (SQLite): an execution a server ran with cassettes.record is exported
// by execution and by its Run's name, and the cassette is the one `run --record` writes of the
// same program (must show 5 on one machine); neither the bearer token nor the redacted field
// is in it (must show 3 across export); it replays offline the same.
func TestExportFromLedger(t *testing.T) {
	t.Setenv("EXPORT_TEST_BEARER", exportBearer)
	storage := fmt.Sprintf("data_dir: %q", filepath.Join(t.TempDir(), "data"))
	exportMatchesRecord(t, exportConfig(t, storage, testkit.MockUpstream(t)), 1)
}

// TestExportAnotherReplica (PostgreSQL): two servers share the ledger; the second runs the
// program, and `export` (a third process) gives the cassette `run --record` gives (must show 5).
func TestExportAnotherReplica(t *testing.T) {
	t.Setenv("EXPORT_TEST_BEARER", exportBearer)
	t.Setenv("MCPS_TEST_DSN", pgtest.Schema(t))
	storage := `data_dir: "-"
ledger: {postgres: {dsn: {env: MCPS_TEST_DSN}}}
blobs: {postgres: {dsn: {env: MCPS_TEST_DSN}}}`
	exportMatchesRecord(t, exportConfig(t, storage, testkit.MockUpstream(t)), 2)
}

// exportMatchesRecord runs exportProgram on the last of replicas servers of cfg, exports it,
// and compares the cassette with run --record's.
func exportMatchesRecord(t *testing.T, cfg string, replicas int) {
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(120*time.Second))
	defer cancel()
	program := fmt.Sprintf(exportProgram, exportBearer)
	var cs *mcp.ClientSession
	for range replicas {
		cs = connectStdio(t, []string{"--config", cfg}, nil)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": program},
		Meta: mcp.Meta{"mcp-sandbox/run": "exported"}})
	if err != nil || res.IsError {
		t.Fatalf("run_code: %v %s", err, testkit.Text(res))
	}

	dir := t.TempDir()
	out, errOut, code := runCLI(t, "", "export", "--config", cfg, "exported", "-o", filepath.Join(dir, "run"))
	if code != 0 {
		t.Fatalf("export RUN: exit %d\n%s\n%s", code, out, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "run", "x_*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("export of the Run wrote %v, want one cassette:\n%s", files, out)
	}
	id := strings.TrimSuffix(filepath.Base(files[0]), ".jsonl")
	one := filepath.Join(dir, "one.jsonl")
	if out, errOut, code := runCLI(t, "", "export", "--config", cfg, id, "-o", one); code != 0 {
		t.Fatalf("export EXECUTION: exit %d\n%s\n%s", code, out, errOut)
	}
	exported := readFile(t, one)
	if byRun := readFile(t, files[0]); byRun != exported {
		t.Errorf("the Run's cassette and the execution's differ:\n%s\n%s", byRun, exported)
	}

	recorded := filepath.Join(dir, "recorded.jsonl")
	if out, errOut, code := runCLI(t, program, "run", "--config", cfg, "--record", recorded, "-"); code != 0 {
		t.Fatalf("run --record: exit %d\n%s\n%s", code, out, errOut)
	}
	if d := cmp.Diff(cassetteShape(t, readFile(t, recorded)), cassetteShape(t, exported)); d != "" {
		t.Errorf("the exported cassette is not the recorded one (-run --record +export):\n%s", d)
	}
	for _, s := range []string{exportBearer, exportField} {
		if strings.Contains(exported, s) {
			t.Errorf("the exported cassette contains %q:\n%s", s, exported)
		}
	}
	if !strings.Contains(exported, `"tool":"mock__create_record"`) || strings.Count(exported, `"seq":`) != 7 {
		t.Errorf("the exported cassette does not hold the seven calls, the field redacted:\n%s", exported)
	}

	offline := exportConfig(t, "data_dir: "+filepath.Join(dir, "offline"), filepath.Join(dir, "no-such-upstream"))
	out, errOut, code = runCLI(t, "", "replay", "--config", offline, filepath.Join(dir, "run"))
	if code != 0 || strings.TrimSpace(out) != files[0]+": same" {
		t.Fatalf("replay of the exported Run: exit %d, want 0 and same:\n%s\n%s", code, out, errOut)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cassetteShape is a cassette's lines as JSON values without what differs between two runs of
// one program: durations (a call's seconds, the result's duration_seconds).
func cassetteShape(t *testing.T, c string) []any {
	t.Helper()
	var out []any
	for _, l := range strings.Split(strings.TrimSpace(c), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("a cassette line is not a JSON object: %v\n%s", err, l)
		}
		delete(v, "seconds")
		if r, ok := v["result"].(map[string]any); ok && len(v) == 1 {
			delete(r, "duration_seconds")
		}
		out = append(out, v)
	}
	return out
}

// TestExportScrubsAgain: `run` with cassettes.record keeps its execution in the ledger too;
// a value that became a secret of the config after the recording (a rotated bearer token) is
// not in the exported cassette either; an id nothing was recorded under exits 1, saying what
// recording needs.
func TestExportScrubsAgain(t *testing.T) {
	const rotated = "rotated-bearer-9876543210"
	t.Setenv("EXPORT_TEST_BEARER", exportBearer)
	dir := t.TempDir()
	cfg := exportConfig(t, fmt.Sprintf("data_dir: %q", filepath.Join(dir, "data")), testkit.MockUpstream(t))
	program := fmt.Sprintf("r = await mock__lookup(sku=%q)\nreturn r", rotated)
	if out, errOut, code := runCLI(t, program, "run", "--config", cfg, "--run", "rotation", "-"); code != 0 || !strings.Contains(out, rotated) {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "", "export", "--config", cfg, "rotation", "-o", filepath.Join(dir, "before")); code != 0 {
		t.Fatalf("export: exit %d\n%s\n%s", code, out, errOut)
	}
	before, _ := filepath.Glob(filepath.Join(dir, "before", "*.jsonl"))
	if len(before) != 1 || !strings.Contains(readFile(t, before[0]), rotated) {
		t.Fatalf("run with cassettes.record kept %v, want one cassette holding the value", before)
	}

	t.Setenv("EXPORT_TEST_BEARER", rotated)
	if out, errOut, code := runCLI(t, "", "export", "--config", cfg, "rotation", "-o", filepath.Join(dir, "after")); code != 0 {
		t.Fatalf("export after the rotation: exit %d\n%s\n%s", code, out, errOut)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "after", "*.jsonl"))
	if len(after) != 1 {
		t.Fatalf("export after the rotation wrote %v", after)
	}
	if c := readFile(t, after[0]); strings.Contains(c, rotated) || !strings.Contains(c, `"sku":"[redacted]"`) {
		t.Errorf("the exported cassette holds the config's secret, or not the call:\n%s", c)
	}

	exportPrivate(t, cfg, strings.TrimSuffix(filepath.Base(after[0]), ".jsonl"))

	out, errOut, code := runCLI(t, "", "export", "--config", cfg, "x_none", "-o", filepath.Join(dir, "none.jsonl"))
	if code != 1 || !strings.Contains(errOut, "cassettes.record") {
		t.Errorf("export of an id nothing was recorded under: exit %d, want 1 and what recording needs\n%s\n%s", code, out, errOut)
	}
}

// exportPrivate (issue 38, S5): `export -o` writes a file readable by its owner only, 0600,
// even over a world-readable file in a group-writable directory (a new file renamed into
// place, never the old one's mode); onto a symbolic link, or into a directory that is one, it
// is refused (exit 1), and the link's target is untouched; `run --record` onto a link is
// refused before the program runs (exit 2).
func exportPrivate(t *testing.T, cfg, execution string) {
	t.Helper()
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o775); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o775) // whatever the umask
	over := filepath.Join(shared, "cassette.jsonl")
	if err := os.WriteFile(over, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(over, 0o644)
	if out, errOut, code := runCLI(t, "", "export", "--config", cfg, execution, "-o", over); code != 0 {
		t.Fatalf("export over a 0644 file: exit %d\n%s%s", code, out, errOut)
	}
	if info, err := os.Lstat(over); err != nil || info.Mode() != 0o600 || info.Size() < 10 {
		t.Errorf("the exported file: %v %v, want a regular file of mode 0600", info.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(shared, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	target := filepath.Join(shared, "target")
	if err := os.WriteFile(target, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(shared, "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "", "export", "--config", cfg, execution, "-o", link)
	if code != 1 || !strings.Contains(errOut, "is a symbolic link") {
		t.Errorf("export onto a symbolic link: exit %d, want 1 naming the link\n%s", code, errOut)
	}
	if b, _ := os.ReadFile(target); string(b) != "untouched" {
		t.Errorf("the link's target now holds %q", b)
	}
	if info, err := os.Lstat(link); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", info.Mode(), err)
	}
	dirLink := filepath.Join(shared, "dirlink")
	if err := os.Symlink(t.TempDir(), dirLink); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "", "export", "--config", cfg, "rotation", "-o", dirLink); code != 1 || !strings.Contains(errOut, "is a symbolic link") {
		t.Errorf("export of a Run into a directory that is a link: exit %d\n%s", code, errOut)
	}
	if out, errOut, code := runCLI(t, "raise SystemExit('ran')", "run", "--config", cfg, "--record", link, "-"); code != 2 ||
		!strings.Contains(errOut, "--record: ") || strings.Contains(out, "ran") {
		t.Errorf("run --record onto a link: exit %d, want 2 before running\n%s%s", code, out, errOut)
	}
}
