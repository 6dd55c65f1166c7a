//go:build unix

package python

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakePython writes a shell script that answers Dirs with dirs and counts how often it runs.
func fakePython(t *testing.T, dirs ...string) (python, count string) {
	t.Helper()
	d := t.TempDir()
	python, count = filepath.Join(d, "python"), filepath.Join(d, "count")
	script := "#!/bin/sh\necho x >> " + count + "\nprintf '%s\\n' " + strings.Join(dirs, " ") + " " + codeMarker + " compiled-$(cat | wc -c)\n"
	if err := os.WriteFile(python, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return python, count
}

func runs(t *testing.T, count string) int {
	b, _ := os.ReadFile(count)
	return strings.Count(string(b), "x")
}

// The interpreter is asked once; the answer is reused until the interpreter, a directory it
// listed, a .pth file of a site directory or the source changes, and a cache file that lies
// is not used.
func TestInspectCached(t *testing.T) {
	source := "print('bootstrap')\n"
	lib, site := t.TempDir(), filepath.Join(t.TempDir(), "site-packages")
	if err := os.Mkdir(site, 0o755); err != nil {
		t.Fatal(err)
	}
	python, count := fakePython(t, lib, site)
	cache := filepath.Join(t.TempDir(), "state")
	ctx := context.Background()
	ask := func(want int) {
		t.Helper()
		info, err := InspectCached(ctx, python, source, cache)
		if err != nil {
			t.Fatal(err)
		}
		if dirs := info.Dirs; len(dirs) != 2 || dirs[0] != lib || dirs[1] != site || info.Code != fmt.Sprintf("compiled-%d", len(source)) {
			t.Fatalf("info = %+v", info)
		}
		if n := runs(t, count); n != want {
			t.Fatalf("the interpreter ran %d times, want %d", n, want)
		}
	}
	ask(1)
	ask(1)
	if st, err := os.Stat(cache); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir: %v %v", st, err)
	}
	// A .pth file can add directories: a new one means asking again.
	later := time.Now().Add(2 * time.Second)
	pth := filepath.Join(site, "extra.pth")
	if err := os.WriteFile(pth, []byte("/opt/extra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ask(2)
	ask(2)
	// So does a rewritten one, and a changed interpreter.
	if err := os.Chtimes(pth, later, later); err != nil {
		t.Fatal(err)
	}
	ask(3)
	if err := os.Chtimes(python, later, later); err != nil {
		t.Fatal(err)
	}
	ask(4)
	source = "print('another bootstrap')\n"
	ask(5)
	ask(5)
	// A cache file naming what is not a directory is not believed.
	if err := os.WriteFile(filepath.Join(cache, CacheFile), []byte(`{"`+python+` `+sourceHash(source)+`":{"stamp":"x","dirs":["relative"],"probed":1,"source":"`+sourceHash(source)+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ask(6)
	// No cache dir: asked every time.
	if _, err := InspectCached(ctx, python, source, ""); err != nil || runs(t, count) != 7 {
		t.Fatalf("without a cache: %v, %d runs", err, runs(t, count))
	}
}

// Argv swaps the bootstrap's text for its compiled form only when it is that text and the
// interpreter compiled it.
func TestInfoArgv(t *testing.T) {
	argv := []string{"-I", "-c", "SOURCE", "canary", "1"}
	if got := (Info{}).Argv(argv, "SOURCE"); !slices.Equal(got, argv) {
		t.Errorf("without code: %v", got)
	}
	if got := (Info{Code: "Yw=="}).Argv(argv, "OTHER"); !slices.Equal(got, argv) {
		t.Errorf("another source: %v", got)
	}
	want := []string{"-I", "-c", codeStub, "Yw==", "canary", "1"}
	if got := (Info{Code: "Yw=="}).Argv(argv, "SOURCE"); !slices.Equal(got, want) {
		t.Errorf("compiled: %v", got)
	}
	want = []string{"-I", "-S", "-c", siteStub, "Yw==", "/p\n/e\n/a\n/b", "canary", "1"}
	if got := (Info{Code: "Yw==", NoSite: true, Site: []string{"/a", "/b"}, Prefix: "/p", ExecPrefix: "/e"}).Argv(argv, "SOURCE"); !slices.Equal(got, want) {
		t.Errorf("compiled, without site: %v", got)
	}
	if got := (Info{NoSite: true, Prefix: "/p", ExecPrefix: "/e"}).Argv(argv, "SOURCE"); !slices.Equal(got, argv) {
		t.Errorf("without site but without code: %v", got)
	}
	// An answer that says nothing of the prefixes (an older probe's) keeps site.
	want = []string{"-I", "-c", codeStub, "Yw==", "canary", "1"}
	if got := (Info{Code: "Yw==", NoSite: true, Site: []string{"/a"}}).Argv(argv, "SOURCE"); !slices.Equal(got, want) {
		t.Errorf("without the prefixes: %v", got)
	}
}

// SourceArgv runs another program's source without site as the bootstrap runs (its first
// line kept first), only when info says what site adds.
func TestSourceArgv(t *testing.T) {
	argv := []string{"-I", "-c", "# first\nrun()", "a", "b"}
	if got := (Info{Code: "Yw=="}).SourceArgv(argv); !slices.Equal(got, argv) {
		t.Errorf("with site: %v", got)
	}
	got := (Info{NoSite: true, Site: []string{"/a"}, Prefix: "/p", ExecPrefix: "/e"}).SourceArgv(argv)
	want := []string{"-I", "-S", "-c", "# first\nimport sys\n" + sitePrelude(1) + "run()", "/p\n/e\n/a", "a", "b"}
	if !slices.Equal(got, want) {
		t.Errorf("without site:\n%q\nwant\n%q", got, want)
	}
}

func sourceHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The compiled code is kept in a file of its own, named by its hash, not in the cache file
// every start decodes; a code file gone or altered means asking again, and an entry written
// with its code inline (an older binary's) is still used.
func TestInspectCachedCodeFile(t *testing.T) {
	source := "print('bootstrap')\n"
	python, count := fakePython(t, t.TempDir())
	cache := filepath.Join(t.TempDir(), "state")
	ctx := context.Background()
	want := fmt.Sprintf("compiled-%d", len(source))
	ask := func(runsWanted int) {
		t.Helper()
		info, err := InspectCached(ctx, python, source, cache)
		if err != nil {
			t.Fatal(err)
		}
		if info.Code != want {
			t.Fatalf("code = %q, want %q", info.Code, want)
		}
		if n := runs(t, count); n != runsWanted {
			t.Fatalf("the interpreter ran %d times, want %d", n, runsWanted)
		}
	}
	ask(1)
	b, err := os.ReadFile(filepath.Join(cache, CacheFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), want) {
		t.Fatalf("the cache file holds the code: %s", b)
	}
	codeFile := filepath.Join(cache, codeFilePrefix+sourceHash(want))
	if got, err := os.ReadFile(codeFile); err != nil || string(got) != want {
		t.Fatalf("code file: %q, %v", got, err)
	}
	ask(1)
	if err := os.WriteFile(codeFile, []byte("compiled-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	ask(2)
	if err := os.Remove(codeFile); err != nil {
		t.Fatal(err)
	}
	ask(3)
	// An older binary's entry, its code inline, with the stamps as they are now.
	entries := readCache(filepath.Join(cache, CacheFile))
	for k, e := range entries {
		e.Code, e.CodeSum = "compiled-inline", ""
		entries[k] = e
	}
	js, _ := json.Marshal(entries)
	if err := os.WriteFile(filepath.Join(cache, CacheFile), js, 0o600); err != nil {
		t.Fatal(err)
	}
	want = "compiled-inline"
	ask(3)
	// Code files no entry names are removed at the next write.
	stale := filepath.Join(cache, codeFilePrefix+sourceHash("stale"))
	if err := os.WriteFile(stale, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	// So are entries past their time (an older binary's, say, its code inline).
	entries = readCache(filepath.Join(cache, CacheFile))
	entries["older"] = cacheEntry{Info: Info{Code: "compiled-long-ago"}, Probed: 1}
	js, _ = json.Marshal(entries)
	if err := os.WriteFile(filepath.Join(cache, CacheFile), js, 0o600); err != nil {
		t.Fatal(err)
	}
	source, want = "print('another')\n", "compiled-17"
	ask(4)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a code file no entry names was kept: %v", err)
	}
	if _, ok := readCache(filepath.Join(cache, CacheFile))["older"]; ok {
		t.Fatal("an entry past its time was kept")
	}
}
