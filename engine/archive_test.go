package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// archiveOf is a WorkspaceArchiver handing over a fixed tar stream.
type archiveOf []byte

func (a archiveOf) WorkspaceArchive(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(a)), nil
}

// A workspace handed over as a tar stream (an engine in a VM) is collected by the rules of a
// walk: regular files within the bounds, links and special files omitted with their reasons,
// and names that would leave the workspace never taken; a stream cut short keeps what came
// before it and says the rest was not looked at.
func TestCollectArchive(t *testing.T) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	add := func(h tar.Header, body string) {
		h.Size = int64(len(body))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := w.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, body); err != nil {
			t.Fatal(err)
		}
	}
	add(tar.Header{Name: "out", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(tar.Header{Name: "out/data.csv", Typeflag: tar.TypeReg}, "a,b\n1,2\n")
	add(tar.Header{Name: "../escape.txt", Typeflag: tar.TypeReg}, "outside")
	add(tar.Header{Name: "/abs.txt", Typeflag: tar.TypeReg}, "absolute")
	add(tar.Header{Name: "etc-passwd", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, "")
	add(tar.Header{Name: "pipe", Typeflag: tar.TypeFifo}, "")
	add(tar.Header{Name: "big.bin", Typeflag: tar.TypeReg}, strings.Repeat("x", 100))
	add(tar.Header{Name: "last.txt", Typeflag: tar.TypeReg}, "last")
	w.Close()

	atts, files, omitted := collectArchive(context.Background(), archiveOf(buf.Bytes()), ArtifactPolicy{MaxFiles: 8, MaxBytes: 50, InlineBytes: 100})
	var names []string
	for _, a := range atts {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "out/data.csv,last.txt" || len(files) != 2 || string(files[0].Data) != "a,b\n1,2\n" {
		t.Errorf("collected %v (%d files), want out/data.csv and last.txt", names, len(files))
	}
	if atts[0].Text == nil || atts[0].Location != "inline" {
		t.Errorf("a small text artifact is not inline: %+v", atts[0])
	}
	reasons := map[string]string{}
	for _, o := range omitted {
		reasons[o.Path] = o.Reason
	}
	for path, want := range map[string]string{"etc-passwd": "symbolic link", "pipe": "a fifo", "big.bin": "max_bytes"} {
		if !strings.Contains(reasons[path], want) {
			t.Errorf("%s omitted for %q, want %q", path, reasons[path], want)
		}
	}
	for _, bad := range []string{"../escape.txt", "escape.txt", "/abs.txt"} {
		if _, ok := reasons[bad]; ok {
			t.Errorf("%s, which leaves the workspace, is listed", bad)
		}
	}

	// Cut in the middle of a file's content: what came before stays, the rest is said.
	atts, _, omitted = collectArchive(context.Background(), archiveOf(buf.Bytes()[:1536+100]), ArtifactPolicy{})
	if len(omitted) == 0 || !strings.Contains(omitted[len(omitted)-1].Reason, "broke off") && !strings.Contains(omitted[len(omitted)-1].Reason, "unreadable") {
		t.Errorf("a stream cut short: artifacts %+v, omitted %+v", atts, omitted)
	}
}
