package conformance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestHostileUpstream drives the built binary against an upstream that sends a $ref cycle,
// an exploding schema, names that break the MCP rules and a 1 MiB description with forged
// lines. The server stays up for the tenant; the cyclic tool is unavailable with its reason,
// the exploding one refuses its call, the bad names are skipped and said, and every line of
// list_tools starts with a valid name or is a note.
func TestHostileUpstream(t *testing.T) {
	cfg := fmt.Sprintf(`
data_dir: %[2]q
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
upstreams:
  evil: {command: [%[1]q, "--hostile"]}
tenants:
  t:
    upstreams: [evil]
    agents:
      default: {expose_upstream_tools: true, code_execution: {limits: {wall_seconds: 60}}}
`, built.mock, filepath.Join(t.TempDir(), "data"))
	cs, _ := serve(t, cfg, nil)

	host := hostTools(t, cs)
	if !host["evil__plain"] || !host["evil__long"] || host["evil__loop"] {
		t.Errorf("tools/list: %.500v; want evil__plain and evil__long exposed, evil__loop not", host)
	}
	for name := range host {
		if !regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`).MatchString(name) {
			t.Errorf("tools/list offers %.200q", name)
		}
	}

	text := testkit.Text(call(t, cs, "list_tools", map[string]any{}))
	for _, line := range strings.Split(text, "\n") {
		if !regexp.MustCompile(`^(evil__[A-Za-z0-9_.-]+(\s|:|$)|note on server evil: )`).MatchString(line) || len(line) > 1000 {
			t.Errorf("list_tools line %.200q is neither a tool nor a note", line)
		}
	}
	if !strings.Contains(text, "evil__loop (alias): Has a $ref cycle. [unavailable: its input schema refers to itself") ||
		!strings.Contains(text, "skipped 2 tools") {
		t.Errorf("list_tools:\n%.2000s", text)
	}

	var kinds []string
	run(t, cs, `
out = []
for name, args in (("evil__loop", {"a": "x"}), ("evil__fan", {"a": "x"})):
    try:
        await call_tool(name, args)
        out.append("called")
    except ToolError as e:
        out.append(e.kind)
out.append(await call_tool("evil__plain", {"a": "x"}))
return out
`, &kinds)
	if strings.Join(kinds, ",") != "unavailable,invalid_arguments,called plain" {
		t.Errorf("calls: %v", kinds)
	}
	var v int
	run(t, cs, "6*7", &v)
	if v != 42 {
		t.Errorf("the server after the hostile upstream answered %d", v)
	}
}
