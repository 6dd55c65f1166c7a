package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
)

// TestStateIsPrivate: the ledger (and its -wal and -shm files) was created world-readable.
// Every file under the data dir is 0600 and every directory 0700 now, whatever the umask, and
// a data dir an older version left open to others is tightened when opened.
func TestStateIsPrivate(t *testing.T) {
	for _, old := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "data")
		if old {
			if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "ledger.db"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(dir, 0o755)
			_ = os.Chmod(filepath.Join(dir, "blobs"), 0o755)
			_ = os.Chmod(filepath.Join(dir, "ledger.db"), 0o644)
		}
		st, err := assembly.OpenStorage(context.Background(), &assembly.Config{Config: &configs.Config{DataDir: dir}, Env: processEnv})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Blobs.Put(context.Background(), "tenant", "stdout", "text/plain", strings.NewReader("kept output"), 1<<20); err != nil {
			t.Fatal(err)
		}
		files := 0
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			} else {
				files++
			}
			if fi.Mode().Perm() != want {
				t.Errorf("old=%v: %s is %v, want %v", old, p, fi.Mode().Perm(), want)
			}
			return nil
		})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if files < 4 { // the ledger, its -wal and -shm, an owner lock, a blob
			t.Errorf("old=%v: only %d files under the data dir", old, files)
		}
	}
}
