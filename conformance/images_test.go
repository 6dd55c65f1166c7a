package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestImagesComeBackAsImageContent: a program saves a matplotlib figure (a PNG), the same PNG
// under a name that does not say so, a large "image" over images.inline_bytes and a text file
// named like an image. The figures come back as ImageContent the go-sdk client decodes to the
// bytes the program wrote, beside their handles; the large one as its handle only; the text
// file is no image, whatever its name.
func TestImagesComeBackAsImageContent(t *testing.T) {
	// Debian's interpreter, where python3-matplotlib installs it (PATH may name another).
	const python = "/usr/bin/python3"
	err := exec.Command(python, "-c", "import matplotlib").Run()
	gate.Require(t, "matplotlib", err == nil, python+" cannot import matplotlib (apt-get install python3-matplotlib)")
	cfg := fmt.Sprintf(`
data_dir: %q
`+processProfile+`    python: %q
    hard_limits: {wall_seconds: 120}
    images: {inline_bytes: 256KiB}
tenants:
  t:
    agents:
      default:
        code_execution: {limits: {wall_seconds: 120}}
`, filepath.Join(t.TempDir(), "data"), python)
	cs, _ := serve(t, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": `
import base64, os, tempfile
os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp())
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(3, 2), dpi=60)
ax.plot([0, 1, 2, 3], [0, 1, 4, 9])
fig.savefig("figure.png")
data = open("figure.png", "rb").read()
open("figure.dat", "wb").write(data)
open("large.png", "wb").write(data[:8] + os.urandom(300 * 1024))
open("notes.png", "w").write("not an image\n")
return base64.b64encode(data).decode()
`}})
	if err != nil {
		t.Fatalf("run_code: %v", err)
	}
	if res.IsError {
		t.Fatalf("run_code failed: %s", testkit.Text(res))
	}
	b := reportOf(res)
	var r result
	var b64 string
	if err := json.Unmarshal(b, &r); err != nil || json.Unmarshal(r.Value, &b64) != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	want, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("value: %v", err)
	}
	if !bytes.HasPrefix(want, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("the program's figure is not a PNG: %.40q", want)
	}
	var images []*mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			images = append(images, ic)
		}
	}
	if len(images) != 2 {
		t.Fatalf("%d images, want 2 (figure.dat and figure.png; not large.png nor notes.png); text:\n%s", len(images), testkit.Text(res))
	}
	for i, ic := range images {
		if ic.MIMEType != "image/png" || !bytes.Equal(ic.Data, want) {
			t.Errorf("image %d: %s, %d bytes, want the figure's %d bytes", i, ic.MIMEType, len(ic.Data), len(want))
		}
	}
	text := testkit.Text(res)
	for _, name := range []string{"figure.png", "figure.dat", "large.png", "notes.png"} {
		if !strings.Contains(text, "artifact "+name) {
			t.Errorf("the text does not name artifact %s:\n%s", name, text)
		}
	}
	if !strings.Contains(text, "large.png: ") || !strings.Contains(text, "handle h_") {
		t.Errorf("large.png should be named with its handle:\n%s", text)
	}
}
