package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
)

// TestRealUpstreamsJoin: three reference servers nobody here wrote (server-everything,
// server-memory and server-filesystem, pointed at a temporary directory) as stdio upstreams
// of one tenant; one program uses all three and joins their answers.
func TestRealUpstreamsJoin(t *testing.T) {
	node, everything := npmPeer(t, "server-everything")
	_, memory := npmPeer(t, "server-memory")
	_, filesystem := npmPeer(t, "server-filesystem")
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "orders.txt"), []byte("A-17 shipped\nB-42 pending\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
data_dir: %q
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
upstreams:
  everything: {command: [%q, %q, "stdio"]}
  memory:     {command: [%q, %q], env: {MEMORY_FILE_PATH: %q}}
  files:      {command: [%q, %q, %q]}
tenants:
  t:
    upstreams: [everything, memory, files]
    agents:
      default: {code_execution: {limits: {wall_seconds: 60}}}
`, filepath.Join(dir, "data"), node, everything, node, memory, filepath.Join(dir, "memory.jsonl"), node, filesystem, files)
	if _, err := configs.Parse([]byte(cfg), "peers.yaml"); err != nil {
		t.Fatal(err)
	}
	cs, _ := serve(t, cfg, nil)
	var got struct {
		Sum      string   `json:"sum"`
		Pending  []string `json:"pending"`
		Recalled []string `json:"recalled"`
	}
	run(t, cs, fmt.Sprintf(`
import re
text = await call_tool("files__read_text_file", {"path": %q})
if not isinstance(text, str):
    text = text.get("content", "") if isinstance(text, dict) else str(text)
pending = [line.split()[0] for line in text.splitlines() if line.endswith("pending")]
await memory__create_entities(entities=[
    {"name": o, "entityType": "order", "observations": ["pending"]} for o in pending])
graph = await memory__read_graph()
recalled = sorted(e["name"] for e in graph["entities"])
s = await call_tool("everything__get-sum", {"a": len(pending), "b": 41})
return {"sum": re.findall(r"-?\d+", s if isinstance(s, str) else str(s))[-1],
        "pending": pending, "recalled": recalled}
`, filepath.Join(files, "orders.txt")), &got)
	if got.Sum != "42" || len(got.Pending) != 1 || got.Pending[0] != "B-42" || len(got.Recalled) != 1 || got.Recalled[0] != "B-42" {
		t.Fatalf("joined answer %+v, want sum 42 and B-42 read from files and recalled from memory", got)
	}
}
