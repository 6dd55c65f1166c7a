package sandboxtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileCatalogue: every case of Hostile has a known class and a unique name, and is
// either run by this suite or names a test that exists where it says.
func TestHostileCatalogue(t *testing.T) {
	classes := map[Class]bool{TakeDown: true, Channel: true, Exhaustion: true, Escape: true, ProtocolAbuse: true}
	names := map[string]bool{}
	for _, h := range Hostile {
		if !classes[h.Class] {
			t.Errorf("%q: unknown class %q", h.Name, h.Class)
		}
		if names[h.Name] {
			t.Errorf("%q listed twice", h.Name)
		}
		names[h.Name] = true
		if (h.Where == "") == (h.run == nil) {
			t.Errorf("%q: run here or name where it is tested, one of the two", h.Name)
			continue
		}
		if h.Where == "" {
			continue
		}
		file, fn, ok := strings.Cut(h.Where, ":")
		if !ok {
			t.Errorf("%q: Where %q is not file:Test", h.Name, h.Where)
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(file)))
		if err != nil {
			t.Errorf("%q: %v", h.Name, err)
			continue
		}
		if !strings.Contains(string(b), "\nfunc "+fn+"(") {
			t.Errorf("%q: %s has no func %s", h.Name, file, fn)
		}
	}
}
