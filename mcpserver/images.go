package mcpserver

import (
	"bytes"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/execution"
)

// imageType is the MIME type of an image format the model can be shown (PNG, JPEG, GIF,
// WebP), known by its first bytes and never by the file's name; "" for anything else.
func imageType(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && bytes.HasPrefix(b, []byte("RIFF")) && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// imageContents are the image artifacts of res of at most limit bytes each, as ImageContent in
// the artifacts' order (the text names each with its handle); a larger one is left to its
// handle. limit 0 sends none.
func imageContents(res *execution.Result, limit int64) []mcp.Content {
	var out []mcp.Content
	for i, f := range res.ArtifactFiles {
		if limit <= 0 || int64(len(f.Data)) > limit || i >= len(res.Artifacts) || res.Artifacts[i].Name != f.Name {
			continue
		}
		if t := imageType(f.Data); t != "" {
			out = append(out, &mcp.ImageContent{Data: f.Data, MIMEType: t})
		}
	}
	return out
}
