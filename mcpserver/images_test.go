package mcpserver

import (
	"bytes"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// TestImageType: the four formats by their first bytes; names and near misses are no image.
func TestImageType(t *testing.T) {
	for in, want := range map[string]string{
		"\x89PNG\r\n\x1a\nrest":        "image/png",
		"\xff\xd8\xff\xe0JFIF":         "image/jpeg",
		"GIF87a....":                   "image/gif",
		"GIF89a....":                   "image/gif",
		"RIFF\x10\x00\x00\x00WEBPVP8 ": "image/webp",
		"RIFF\x10\x00\x00\x00WAVEfmt ": "",
		"\x89PNG":                      "",
		"plot.png":                     "",
		"":                             "",
	} {
		if got := imageType([]byte(in)); got != want {
			t.Errorf("imageType(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestImageContents: images up to the limit, in the artifacts' order; larger ones, other
// files, and everything at limit 0 are left to their handles.
func TestImageContents(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 100)...)
	gif := []byte("GIF89a" + "......")
	big := append([]byte("\xff\xd8\xff"), bytes.Repeat([]byte{2}, 200)...)
	res := &execution.Result{Outcome: engine.Outcome{
		Artifacts: []outputs.Attachment{{Name: "a.dat"}, {Name: "b.txt"}, {Name: "c.jpg"}, {Name: "d"}},
		ArtifactFiles: []engine.ArtifactFile{{Name: "a.dat", Data: png}, {Name: "b.txt", Data: []byte("text")},
			{Name: "c.jpg", Data: big}, {Name: "d", Data: gif}},
	}}
	got := imageContents(res, 150)
	if len(got) != 2 {
		t.Fatalf("%d images, want 2", len(got))
	}
	for i, w := range []struct {
		data []byte
		typ  string
	}{{png, "image/png"}, {gif, "image/gif"}} {
		ic, ok := got[i].(*mcp.ImageContent)
		if !ok || ic.MIMEType != w.typ || !bytes.Equal(ic.Data, w.data) {
			t.Errorf("image %d = %#v, want %s", i, got[i], w.typ)
		}
	}
	if n := len(imageContents(res, 0)); n != 0 {
		t.Errorf("limit 0: %d images, want none", n)
	}
}
