package conformance

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestDirectCallKeepsLargeResult: a host's direct call of an exposed tool whose result is 5 MB
// gets what a program would: a head-and-tail preview and a handle, the whole message (its
// JSON) under the preview size (4000 bytes); read_tool_output pages the handle by line window and by pattern; the
// ledger records the call with the handle, the bytes the host got and the bytes kept.
func TestDirectCallKeepsLargeResult(t *testing.T) {
	cfg, _ := mockConfig(t)
	cs, _ := serve(t, cfg, nil)
	const size, line = 5 << 20, 100 // 52,428 lines of 99 x's and a newline, then 76 x's
	res := call(t, cs, "support__bytes", map[string]any{"n": size, "line": line})
	text := testkit.Text(res)
	if res.IsError || len(text) > 4000 {
		t.Fatalf("direct call: isError %v, %d bytes of text, want a preview under 4000:\n%.600s", res.IsError, len(text), text)
	}
	var kept struct {
		Handle  string `json:"handle"`
		Size    int64  `json:"size"`
		Lines   int    `json:"lines"`
		Context struct {
			BindingBytes  int64 `json:"binding_bytes"`
			ReturnedBytes int64 `json:"returned_bytes"`
			KeptOutBytes  int64 `json:"kept_out_bytes"`
		} `json:"context"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &kept); err != nil || kept.Handle == "" {
		t.Fatalf("structuredContent = %s (%v), want a handle", b, err)
	}
	if len(b) > 1000 {
		t.Errorf("structuredContent is %d bytes: it should hold the handle, not the result", len(b))
	}
	if whole, _ := json.Marshal(res); len(whole) > 4000 {
		t.Errorf("the host's message is %d bytes, over the 4000-byte preview size", len(whole))
	}
	wantLines := size/line + 1
	if kept.Size != size || kept.Lines != wantLines || !strings.Contains(text, kept.Handle) || !strings.HasPrefix(text, strings.Repeat("x", 99)+"\n") {
		t.Fatalf("kept %+v (want size %d, %d lines), text:\n%.300s", kept, size, wantLines, text)
	}
	if c := kept.Context; c.ReturnedBytes != int64(len(text)) || c.BindingBytes < size || c.KeptOutBytes != c.BindingBytes-c.ReturnedBytes {
		t.Errorf("context = %+v, text %d bytes", c, len(text))
	}

	// Windows: the whole content is reachable, a window at a time.
	w := call(t, cs, "read_tool_output", map[string]any{"handle": kept.Handle, "offset": 52000, "limit": 3})
	var win struct {
		Text       string `json:"text"`
		Offset     int    `json:"offset"`
		Count      int    `json:"count"`
		TotalLines int    `json:"total_lines"`
		More       bool   `json:"more"`
	}
	b, _ = json.Marshal(w.StructuredContent)
	if err := json.Unmarshal(b, &win); err != nil || w.IsError || win.Count != 3 || win.TotalLines != wantLines || !win.More ||
		win.Text != strings.Repeat(strings.Repeat("x", 99)+"\n", 3) {
		t.Fatalf("read_tool_output window = %s (%v)", b, err)
	}
	w = call(t, cs, "read_tool_output", map[string]any{"handle": kept.Handle, "offset": wantLines - 1, "limit": 10})
	if got := testkit.Text(w); w.IsError || strings.TrimRight(got, "\n") != strings.Repeat("x", size%line) {
		t.Fatalf("last window = %q", got)
	}
	w = call(t, cs, "read_tool_output", map[string]any{"handle": kept.Handle, "pattern": "x{99}", "limit": 2})
	if got := testkit.Text(w); w.IsError || !strings.HasPrefix(got, "0: "+strings.Repeat("x", 99)+"\n1: ") || !strings.Contains(got, "more matches were left out") {
		t.Fatalf("pattern read = %.300q", got)
	}

	// The ledger: the call, its handle, what the host got and what was kept.
	data := regexp.MustCompile(`data_dir: "([^"]+)"`).FindStringSubmatch(cfg)
	if data == nil {
		t.Fatal("no data_dir in the config")
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data[1], sqlite.LedgerFile)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var status, atts string
	var transfer, preserved int64
	if err := db.QueryRow(`SELECT status, transfer_bytes, preserved_bytes, coalesce(attachments, '') FROM tool_calls WHERE tool = 'support__bytes'`).
		Scan(&status, &transfer, &preserved, &atts); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || transfer >= 4000+200 || preserved != size || !strings.Contains(atts, kept.Handle) {
		t.Errorf("ledger: status %s, transfer %d, preserved %d, attachments %s", status, transfer, preserved, atts)
	}
}
