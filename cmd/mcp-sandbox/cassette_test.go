package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// fileBearer is the bearer token cassetteConfig's second URL upstream reads from a file.
const fileBearer = "file-bearer-value-4242424242"

// cassetteConfig is an agent granted the mock upstream (command, which need not exist for a
// replay), and two more upstreams by URL, with bearer tokens from the environment and a file.
func cassetteConfig(t *testing.T, command string) string {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(fileBearer+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
profiles:
  default: {backend: process, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}, binding_budget: {max_result_bytes: 2000}}
upstreams:
  mock: {command: [%q]}
  web: {url: "http://127.0.0.1:9/mcp", bearer: {env: CASSETTE_TEST_BEARER}}
  files: {url: "http://127.0.0.1:9/files", bearer: {file: %q}}
tenants:
  t:
    upstreams: [mock]
    agents:
      a: {code_execution: {profile: default}}
`, filepath.Join(t.TempDir(), "data"), command, tokenFile))
}

const fiveCalls = `out = []
for a in (1, 2, 3, 4, 5):
    out.append(await mock__add(a=a, b=10))
return out`

// TestReplayCassette records a program calling the mock upstream five times (run --record),
// then replays it with the mock's command pointing nowhere, so no upstream can answer: the
// replay completes with the recorded value, exit 0 (must show 1), alone and in a directory.
// An edited program whose third call has another argument stops at sequence 3 with
// replay_diverged, the recorded and the actual call shown (must show 2).
func TestReplayCassette(t *testing.T) {
	t.Setenv("CASSETTE_TEST_BEARER", "bearer-value-0123456789")
	dir := t.TempDir()
	cass := filepath.Join(dir, "five.jsonl")
	out, errOut, code := runCLI(t, fiveCalls, "run", "--config", cassetteConfig(t, testkit.MockUpstream(t)), "--record", cass, "-")
	if code != 0 {
		t.Fatalf("run --record: exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct{ Value json.RawMessage }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cass)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 7 {
		t.Fatalf("the cassette has %d lines, want a header, 5 calls and the result:\n%s", len(lines), b)
	}
	var third struct {
		Seq       int
		Tool      string
		Arguments json.RawMessage
		Outcome   string
		Result    json.RawMessage
	}
	if err := json.Unmarshal([]byte(lines[3]), &third); err != nil {
		t.Fatal(err)
	}
	if third.Seq != 3 || third.Tool != "mock__add" || string(third.Arguments) != `{"a":3,"b":10}` || third.Outcome != "ok" || !strings.Contains(string(third.Result), "13") {
		t.Errorf("the third call's line is %s", lines[3])
	}

	offline := cassetteConfig(t, filepath.Join(dir, "no-such-upstream"))
	out, errOut, code = runCLI(t, "", "replay", "--config", offline, cass)
	if code != 0 || strings.TrimSpace(out) != cass+": same" {
		t.Fatalf("replay: exit %d, want 0 and same:\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "", "replay", "--config", offline, "--json", cass)
	var o struct {
		Verdict       string
		RecordedValue json.RawMessage `json:"recorded_value"`
		ActualValue   json.RawMessage `json:"actual_value"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil || code != 0 || o.Verdict != "same" || !cassette.SameJSON(o.ActualValue, res.Value) {
		t.Fatalf("replay --json: exit %d, %v:\n%s\n%s", code, err, out, errOut)
	}

	edited := filepath.Join(dir, "edited.py")
	if err := os.WriteFile(edited, []byte(strings.Replace(fiveCalls, "(1, 2, 3, 4, 5)", "(1, 2, 99, 4, 5)", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, "", "replay", "--config", offline, "--program", edited, "--json", cass)
	var d struct {
		Verdict    string
		Divergence struct {
			Seq      int
			Recorded struct {
				Tool      string
				Arguments json.RawMessage
			}
			Actual struct {
				Tool      string
				Arguments json.RawMessage
			}
		}
		Failure struct{ Kind, Message string }
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 1 {
		t.Fatalf("replay of the edited program: exit %d, want 1; %v:\n%s\n%s", code, err, out, errOut)
	}
	if d.Verdict != "diverged" || d.Divergence.Seq != 3 || d.Divergence.Recorded.Tool != "mock__add" || string(d.Divergence.Recorded.Arguments) != `{"a":3,"b":10}` ||
		d.Divergence.Actual.Tool != "mock__add" || string(d.Divergence.Actual.Arguments) != `{"a":99,"b":10}` {
		t.Errorf("the divergence is not the third call, both shown:\n%s", out)
	}
	if !strings.Contains(d.Failure.Message, `call 3 is mock__add with arguments {"a":99,"b":10}`) {
		t.Errorf("the program did not stop with replay_diverged: %+v", d.Failure)
	}
	out, _, code = runCLI(t, "", "replay", "--config", offline, "--program", edited, cass)
	if code != 1 || !strings.Contains(out, "diverged at 3") || !strings.Contains(out, `mock__add {"a":3,"b":10}`) || !strings.Contains(out, `mock__add {"a":99,"b":10}`) {
		t.Errorf("replay's line for the edited program: exit %d:\n%s", code, out)
	}

	// A directory: one line per cassette, exit 1 when any is not the same.
	other := filepath.Join(dir, "other.jsonl")
	if err := os.WriteFile(other, []byte(strings.Replace(string(b), `"a":3,`, `"a":7,`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, "", "replay", "--config", offline, dir)
	if code != 1 || !strings.Contains(out, cass+": same") || !strings.Contains(out, other+": diverged at 3") {
		t.Errorf("replay DIR: exit %d:\n%s\n%s", code, out, errOut)
	}
}

// TestCassetteHasNoSecret records a program that sends the config's bearer tokens (of
// upstreams the tenant is not even granted; one from the environment, one from a file) as
// arguments, so they come back in the result too: neither is anywhere in the cassette, neither in the program, the call nor the result (must
// show 3; a field redacted by its tool's schema: cassette.TestRecorderRedacts, since the
// program refuses a keyword its binding does not take before it is sent).
func TestCassetteHasNoSecret(t *testing.T) {
	const bearer = "bearer-value-0123456789"
	t.Setenv("CASSETTE_TEST_BEARER", bearer)
	cass := filepath.Join(t.TempDir(), "secret.jsonl")
	program := fmt.Sprintf(`r = await mock__lookup(sku=%q)
s = await mock__lookup(sku=%q)
return [r, s]`, bearer, fileBearer)
	out, errOut, code := runCLI(t, program, "run", "--config", cassetteConfig(t, testkit.MockUpstream(t)), "--record", cass, "-")
	if code != 0 || !strings.Contains(out, bearer) || !strings.Contains(out, fileBearer) {
		t.Fatalf("run --record: exit %d, want 0 and the tokens in the value:\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(cass)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{bearer, fileBearer} {
		if strings.Contains(string(b), s) {
			t.Errorf("the cassette contains the bearer token %q:\n%s", s, b)
		}
	}
	if strings.Count(string(b), `"arguments":{"sku":"[redacted]"}`) != 2 || strings.Count(string(b), "\n{\"seq\":") != 2 {
		t.Errorf("the cassette does not hold the call, the token scrubbed:\n%s", b)
	}
}

// keptCall is what the tests read of a cassette's line for a call whose result was kept
// under a handle.
type keptCall struct {
	ResultRef struct {
		Handle struct{ Size int }
		Kept   string
		Cut    bool
	} `json:"result_ref"`
}

// TestReplayHandle records a result over the transfer allowance, kept under a handle, and a
// read_tool_output of it: the cassette holds the handle and the kept bytes, and the replay,
// with no upstream and no blob store, serves both calls and completes the same.
func TestReplayHandle(t *testing.T) {
	dir := t.TempDir()
	cass := filepath.Join(dir, "handle.jsonl")
	const program = `got = await mock__bytes(n=5000, line=50)
page = await read_tool_output(got, limit=2)
return {"got": got, "page": page}`
	out, errOut, code := runCLI(t, program, "run", "--config", cassetteConfig(t, testkit.MockUpstream(t)), "--record", cass, "-")
	if code != 0 {
		t.Fatalf("run --record: exit %d\n%s\n%s", code, out, errOut)
	}
	c, err := os.ReadFile(cass)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(c)), "\n")
	var first keptCall
	if len(lines) != 4 || json.Unmarshal([]byte(lines[1]), &first) != nil || first.ResultRef.Handle.Size != 5000 ||
		len(first.ResultRef.Kept) != 5000 || first.ResultRef.Cut || !strings.Contains(lines[2], `"tool":"read_tool_output"`) {
		t.Fatalf("the cassette does not hold the handle with its kept bytes and the read:\n%.2000s", c)
	}
	out, errOut, code = runCLI(t, "", "replay", "--config", cassetteConfig(t, filepath.Join(dir, "no-such-upstream")), cass)
	if code != 0 || strings.TrimSpace(out) != cass+": same" {
		t.Fatalf("replay: exit %d, want 0 and same:\n%s\n%s", code, out, errOut)
	}
}

// TestReplayLargeResult records a 5 MB result, kept under a handle, that the program reads
// near its end with handle.read() (must show 4). With cassettes.kept_bytes over its size the
// cassette keeps it whole and the replay, with no upstream and no blob store, serves the same
// window: the same value. At the default (1 MiB) the line keeps the first MiB and says cut, and
// the replay serves the handle and what was kept of it: the far window is not there.
func TestReplayLargeResult(t *testing.T) {
	const size = 5 << 20
	const program = `got = await mock__bytes(n=5242880, line=100)
w = await got.read(offset=50000, limit=2)
return {"size": got.size, "text": w["text"], "total": w["total_lines"]}`
	for _, c := range []struct {
		name, kept string
		whole      bool
	}{
		{"kept whole", "cassettes: {kept_bytes: 8MiB}", true},
		{"cut", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := func(command string) string {
				return testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
%s
profiles:
  default: {backend: process, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 120}}
upstreams:
  mock: {command: [%q]}
tenants:
  t:
    upstreams: [mock]
    agents:
      a: {code_execution: {profile: default}}
`, filepath.Join(dir, "data"), c.kept, command))
			}
			cass := filepath.Join(dir, "large.jsonl")
			out, errOut, code := runCLI(t, program, "run", "--config", cfg(testkit.MockUpstream(t)), "--record", cass, "-")
			if code != 0 {
				t.Fatalf("run --record: exit %d\n%.3000s\n%s", code, out, errOut)
			}
			var res struct{ Value struct{ Size, Total int } }
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Value.Size != size || res.Value.Total != size/100+1 {
				t.Fatalf("the recorded run did not read the handle: %v\n%.3000s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(readFile(t, cass)), "\n")
			var first keptCall
			if len(lines) != 3 || json.Unmarshal([]byte(lines[1]), &first) != nil {
				t.Fatalf("the cassette does not hold one call: %d lines", len(lines))
			}
			r := first.ResultRef
			wantKept := size
			if !c.whole {
				wantKept = 1 << 20
			}
			if r.Handle.Size != size || len(r.Kept) != wantKept || r.Cut == c.whole {
				t.Fatalf("the call's line keeps %d bytes of a %d-byte result, cut %v; want %d kept, cut %v", len(r.Kept), r.Handle.Size, r.Cut, wantKept, !c.whole)
			}
			out, errOut, code = runCLI(t, "", "replay", "--json", "--config", cfg(filepath.Join(dir, "no-such-upstream")), cass)
			var o struct {
				Verdict     string
				ActualValue struct{ Size, Total int } `json:"actual_value"`
			}
			if err := json.Unmarshal([]byte(out), &o); err != nil {
				t.Fatalf("replay: %v\n%.3000s\n%s", err, out, errOut)
			}
			switch {
			case c.whole && (code != 0 || o.Verdict != "same"):
				t.Errorf("replay of a result kept whole: exit %d, verdict %s; want 0, same\n%.3000s", code, o.Verdict, out)
			case !c.whole && (code != 1 || o.Verdict != "different_value" || o.ActualValue.Size != size || o.ActualValue.Total != 1<<20/100+1):
				t.Errorf("replay of a cut result: exit %d, verdict %s, value %+v; want the handle served with its first MiB\n%.3000s", code, o.Verdict, o.ActualValue, out)
			}
		})
	}
}
