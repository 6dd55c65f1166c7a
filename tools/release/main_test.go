package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPackHoldsTheBinaryAndTheFiles: both archive formats hold the binary at their root,
// executable, and each file under the name it was given, whole.
func TestPackHoldsTheBinaryAndTheFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin := write("mcp-sandbox", "binary")
	files := []packed{{src: write("README.md", "readme"), name: "README.md"}, {src: write("c.yaml", "config"), name: "config.yaml"}}
	want := map[string]struct {
		body string
		mode int64
	}{"mcp-sandbox": {"binary", 0o755}, "README.md": {"readme", 0o644}, "config.yaml": {"config", 0o644}}
	mtime := time.Unix(1700000000, 0)

	check := func(archive string, got map[string]string, modes map[string]int64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s holds %v, want %d entries", archive, got, len(want))
		}
		for name, w := range want {
			if got[name] != w.body || modes[name] != w.mode {
				t.Errorf("%s: %s = %q mode %o, want %q mode %o", archive, name, got[name], modes[name], w.body, w.mode)
			}
		}
	}

	tgz := filepath.Join(dir, "a.tar.gz")
	if err := pack(tgz, bin, files, mtime); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got, modes := map[string]string{}, map[string]int64{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name], modes[h.Name] = string(b), h.Mode
		if !h.ModTime.Equal(mtime) {
			t.Errorf("%s's time is %v, want %v", h.Name, h.ModTime, mtime)
		}
	}
	check(tgz, got, modes)

	zp := filepath.Join(dir, "a.zip")
	if err := pack(zp, bin, files, mtime); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(zp)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	got, modes = map[string]string{}, map[string]int64{}
	for _, e := range zr.File {
		r, err := e.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		got[e.Name], modes[e.Name] = string(b), int64(e.Mode().Perm())
	}
	check(zp, got, modes)
}
