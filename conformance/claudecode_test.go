package conformance

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/claudecode"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// defaultConfig is the embedded default (configs/default.yaml) with its data_dir set to dir,
// so the test can read the ledger.
func defaultConfig(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "configs", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), `data_dir: ""`, fmt.Sprintf("data_dir: %q", dir), 1)
	if cfg == string(b) {
		t.Fatal("configs/default.yaml has no data_dir line to set")
	}
	return testkit.WriteConfig(t, cfg)
}

// returnedBytes reads context.returned_bytes of every execution the ledger under dir holds,
// oldest first.
func returnedBytes(t *testing.T, dir string) []int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.LedgerFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT returned_bytes FROM executions ORDER BY started_at, rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// runCodeUse is a scripted model's run_code call.
func runCodeUse(code string) claudecode.ToolUse {
	return claudecode.ToolUse{Name: "mcp__sandbox__run_code", Input: map[string]any{"code": code}}
}

// span is when a program ran, as it printed it: "<start> <end>" in seconds since the epoch.
type span struct{ start, end float64 }

const spanProgram = "import time\nt0 = time.time()\ntime.sleep(%g)\nprint(t0, time.time())"

// spansOf reads the spans the programs of one turn printed, from what the model read of them.
func spansOf(t *testing.T, results map[string]claudecode.Block) []span {
	t.Helper()
	var out []span
	for _, b := range results {
		var r struct{ Stdout string }
		if err := json.Unmarshal([]byte(b.ResultText()), &r); err != nil || b.IsError {
			t.Fatalf("a sleeping program's result: %v %s", err, b.ResultText())
		}
		var s span
		if _, err := fmt.Sscan(r.Stdout, &s.start, &s.end); err != nil {
			t.Fatalf("stdout %q: %v", r.Stdout, err)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// TestClaudeCodeHost drives Claude Code as the host, its model a scripted Messages API on
// loopback inside a network namespace of the test's (internal/claudecode), and reads what
// Claude Code sends its model. With the default config: the listing of mcp-sandbox's tools is
// under 4 KiB; the tool_result of print("hi"); 6*7 holds 42 and hi in at most 400 bytes, and
// is exactly context.returned_bytes of that execution; four run_code calls of one turn, each
// sleeping 2 s, run at once (run_code is read-only) and end within 4 s; a failed program is
// read as its text, its traceback's carets under the name, and that text's size is its
// returned_bytes too. With a config granting a destructive tool, under the process backend:
// what the model reads says which guarantees are below enforced, and four calls of one turn run
// one after another.
func TestClaudeCodeHost(t *testing.T) {
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	claude := claudecode.Claude(t, here)
	server := func(cfg string) map[string]claudecode.Server {
		return map[string]claudecode.Server{"sandbox": {Command: built.sandbox, Args: []string{"serve", "--config", cfg}}}
	}
	tools := []string{"mcp__sandbox__run_code", "mcp__sandbox__list_tools", "mcp__sandbox__get_tool_info", "mcp__sandbox__read_tool_output"}

	t.Run("default", func(t *testing.T) {
		dir := t.TempDir()
		sleep := fmt.Sprintf(spanProgram, 2.0)
		model := &claudecode.Model{Turns: []claudecode.Turn{
			{ToolUses: []claudecode.ToolUse{runCodeUse(`print("hi"); 6*7`)}},
			{ToolUses: []claudecode.ToolUse{runCodeUse(sleep), runCodeUse(sleep), runCodeUse(sleep), runCodeUse(sleep)}},
			{ToolUses: []claudecode.ToolUse{runCodeUse("x = 1\nprint(unknown)")}},
			{ToolUses: []claudecode.ToolUse{runCodeUse("import numpy\nnumpy.array([1, 2, 3])"), runCodeUse("import numpy\nnumpy.arange(100000)")}},
			{Text: "done"},
		}}
		claudecode.Run(t, model, &claudecode.Options{Claude: claude, Servers: server(defaultConfig(t, dir)), AllowedTools: tools,
			Prompt: "Compute six times seven with run_code."})
		reqs := model.Messages()
		if len(reqs) < 5 {
			t.Fatalf("Claude Code sent its model %d requests with tools, want 5", len(reqs))
		}
		listing := 0
		for _, d := range reqs[0].Tools {
			if strings.HasPrefix(d.Name, "mcp__sandbox__") {
				b, _ := json.Marshal(d)
				listing += len(b)
			}
		}
		t.Logf("the listing of mcp-sandbox's tools Claude Code sends its model: %d bytes", listing)
		if listing == 0 || listing > 4096 {
			t.Errorf("the listing the model reads is %d bytes, want at most 4 KiB", listing)
		}
		first := claudecode.ToolResults(reqs[1])
		if len(first) != 1 {
			t.Fatalf("the second request carries %d tool results, want 1", len(first))
		}
		var hi claudecode.Block
		for _, b := range first {
			hi = b
		}
		text := hi.ResultText()
		t.Logf("what the model read of print(\"hi\"); 6*7: %d bytes: %s", len(text), text)
		if hi.IsError || !strings.Contains(text, "42") || !strings.Contains(text, "hi") || len(text) > 400 {
			t.Errorf("the model read %d bytes (isError %v), want 42 and hi in at most 400: %s", len(text), hi.IsError, text)
		}

		four := claudecode.ToolResults(reqs[2])
		if len(four) != 4 {
			t.Fatalf("the third request carries %d tool results, want 4", len(four))
		}
		spans := spansOf(t, four)
		for i := 1; i < len(spans); i++ {
			if spans[i].start >= spans[0].end {
				t.Errorf("the programs of one turn ran one after another (%v): run_code is not read-only to Claude Code", spans)
				break
			}
		}
		elapsed := time.Duration((slices.MaxFunc(spans, func(a, b span) int { return int(a.end*1e6 - b.end*1e6) }).end - spans[0].start) * float64(time.Second))
		t.Logf("four 2-second programs of one turn: %v from the first start to the last end", elapsed)
		if elapsed > gate.Scaled(4*time.Second) {
			t.Errorf("four 2-second programs of one turn took %v, want at most 4 s", elapsed)
		}

		var failed claudecode.Block
		for _, b := range claudecode.ToolResults(reqs[3]) {
			failed = b
		}
		ftext := failed.ResultText()
		lines := strings.Split(ftext, "\n")
		carets := false
		for i, l := range lines {
			if strings.TrimSpace(l) == "print(unknown)" && i+1 < len(lines) {
				carets = strings.Index(lines[i+1], "^") == strings.Index(l, "unknown")
			}
		}
		if !failed.IsError || !strings.Contains(ftext, "NameError") || !carets {
			t.Errorf("the failed program read (isError %v), want its traceback with the carets under unknown:\n%s", failed.IsError, ftext)
		}

		// Values as JSON: a numpy array is its list, with the type it was converted from; one
		// too large to show whole is its head and tail and the handle that keeps it.
		values := claudecode.ToolResults(reqs[4])
		if len(values) != 2 {
			t.Fatalf("the fifth request carries %d tool results, want 2", len(values))
		}
		small, large := false, false
		for _, b := range values {
			text := b.ResultText()
			var r struct {
				Value        json.RawMessage `json:"value"`
				ValuePreview string          `json:"value_preview"`
				ValueType    string          `json:"value_type"`
				Attachments  []struct{ Name, Handle string }
			}
			if err := json.Unmarshal([]byte(text), &r); err != nil || r.ValueType != "numpy.ndarray" {
				t.Errorf("a numpy value read as %v %.300s", err, text)
				continue
			}
			switch {
			case string(r.Value) == "[1,2,3]":
				small = true
			case r.Value == nil && strings.HasPrefix(r.ValuePreview, "[0,1,2,") && len(text) < 4500 &&
				len(r.Attachments) == 1 && r.Attachments[0].Name == "value" && r.Attachments[0].Handle != "":
				large = true
				t.Logf("what the model read of numpy.arange(100000): %d bytes", len(text))
			}
		}
		if !small || !large {
			t.Errorf("want [1, 2, 3] and a bounded preview with a handle, got:\n%v", values)
		}

		returned := returnedBytes(t, dir)
		if len(returned) != 8 {
			t.Fatalf("the ledger holds %d executions, want 8", len(returned))
		}
		if returned[0] != int64(len(text)) || returned[5] != int64(len(ftext)) {
			t.Errorf("context.returned_bytes %d and %d, but Claude Code handed its model %d and %d bytes", returned[0], returned[5], len(text), len(ftext))
		}
	})

	t.Run("destructive", func(t *testing.T) {
		cfg := testkit.WriteConfig(t, fmt.Sprintf(`profiles:
  default:
    backend: process
    isolation: process
upstreams:
  support: {command: [%q]}
tenants:
  local:
    upstreams: [support]
    agents:
      default:
        expose_upstream_tools: false
        code_execution: {}
`, built.mock))
		sleep := fmt.Sprintf(spanProgram, 0.5)
		model := &claudecode.Model{Turns: []claudecode.Turn{
			{ToolUses: []claudecode.ToolUse{runCodeUse(`print("hi"); 6*7`)}},
			{ToolUses: []claudecode.ToolUse{runCodeUse(sleep), runCodeUse(sleep), runCodeUse(sleep), runCodeUse(sleep)}},
			{Text: "done"},
		}}
		claudecode.Run(t, model, &claudecode.Options{Claude: claude, Servers: server(cfg), AllowedTools: tools,
			Prompt: "Compute six times seven with run_code."})
		reqs := model.Messages()
		if len(reqs) < 3 {
			t.Fatalf("Claude Code sent its model %d requests with tools, want 3", len(reqs))
		}
		for _, b := range claudecode.ToolResults(reqs[1]) {
			text := b.ResultText()
			t.Logf("what the model read under the process backend: %s", text)
			var r struct {
				Value      int               `json:"value"`
				Guarantees map[string]string `json:"guarantees"`
			}
			if err := json.Unmarshal([]byte(text), &r); err != nil || r.Value != 42 || len(r.Guarantees) == 0 {
				t.Errorf("the model does not read the guarantees below enforced: %v %s", err, text)
			}
			for d, g := range r.Guarantees {
				if g == "enforced" {
					t.Errorf("guarantee %s is enforced, yet listed as below it", d)
				}
			}
		}
		spans := spansOf(t, claudecode.ToolResults(reqs[2]))
		for i := 1; i < len(spans); i++ {
			if spans[i].start < spans[i-1].end {
				t.Errorf("granted a destructive tool, run_code ran at once with another (%v): it must not be read-only", spans)
				break
			}
		}
	})
}
