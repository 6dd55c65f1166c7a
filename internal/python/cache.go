package python

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CacheFile is the name of the file InspectCached keeps its answers in.
const CacheFile = "python-inspect.json"

// cacheTTL bounds how long an answer is trusted even though nothing it was stamped with
// changed: something the stamps do not see (a new site directory, a .pth file rewritten in the
// same second at the same size) is noticed within it.
const cacheTTL = 24 * time.Hour

// maxCacheBytes bounds the cache file read.
const maxCacheBytes = 4 << 20

// codeFilePrefix names the files beside CacheFile that hold an answer's compiled code, each
// named after its SHA-256: the code is most of an answer (about 90 KB of base64 for the
// bootstrap), and decoding it from JSON at every start took a one-shot command about 0.8 ms of
// its start (docs/design.md §19.10), where reading a file of its own takes a read and a hash.
const codeFilePrefix = "python-code-"

// cacheEntry is one interpreter's answer and what it was stamped with. Its Info.Code is
// kept in a code file (CodeSum), not in the cache file; an entry written with the code
// inline (an older binary's) is read as it is.
type cacheEntry struct {
	Info
	CodeSum string `json:"code_sha256,omitempty"` // the code file's content, when Info.Code is kept there
	Stamp   string `json:"stamp"`                 // the interpreter's file, and every directory and .pth file listed
	Source  string `json:"source"`                // the SHA-256 of the source compiled
	Probed  int64  `json:"probed"`                // unix seconds
}

// InspectCached is Inspect, remembered in dir/CacheFile: asking an interpreter means starting
// it, which costs as much as the program a one-shot command runs. An answer is used for the
// same source while the interpreter's file, the directories it listed and the .pth files in
// its site directories (which can add directories) are unchanged, and for cacheTTL at most;
// otherwise the interpreter is asked again and the file rewritten (atomically; a failed write
// only costs the next start a probe), the compiled code in a file of its own beside it. dir ""
// means no cache: Inspect.
//
// The file is trusted as the data dir is (it is the server's own, 0700): its directories
// become read-only mounts and Landlock rules, after a check that they are absolute, clean
// directories; its compiled code only ever runs inside the sandbox, where the host trusts
// nothing the child says anyway.
func InspectCached(ctx context.Context, python, source, dir string) (Info, error) {
	if dir == "" {
		return Inspect(ctx, python, source)
	}
	path := filepath.Join(dir, CacheFile)
	entries := readCache(path)
	sum := sha256.Sum256([]byte(source))
	src := hex.EncodeToString(sum[:])
	// Two versions of the binary sharing a data dir each keep theirs; probeVersion tells
	// answers apart that an older probe gave without a field a newer one reads.
	key := python + " " + src + probeVersion
	if e, ok := entries[key]; ok && e.Source == src && time.Since(time.Unix(e.Probed, 0)) < cacheTTL &&
		usableDirs(e.Dirs) && stamp(python, e.Dirs) == e.Stamp && readCode(dir, &e) {
		return e.Info, nil
	}
	info, err := Inspect(ctx, python, source)
	if err != nil {
		return Info{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return info, nil
	}
	e := cacheEntry{Info: info, Stamp: stamp(python, info.Dirs), Source: src, Probed: time.Now().Unix(), CodeSum: noCode}
	if e.Code != "" {
		e.CodeSum, e.Code = codeSum([]byte(info.Code)), ""
		if writeAtomic(dir, filepath.Join(dir, codeFilePrefix+e.CodeSum), []byte(info.Code)) != nil {
			return info, nil
		}
	}
	entries[key] = e
	maps.DeleteFunc(entries, func(_ string, e cacheEntry) bool { return time.Since(time.Unix(e.Probed, 0)) >= cacheTTL })
	for len(entries) > maxCacheEntries { // the oldest answers go first
		oldest := key
		for k, e := range entries {
			if e.Probed < entries[oldest].Probed {
				oldest = k
			}
		}
		delete(entries, oldest)
	}
	_ = writeCache(dir, path, entries)
	return info, nil
}

// probeVersion is appended to an answer's key: "" for the first probe, " site-prefix" since
// it says what site adds to sys.path and sets sys.prefix to (Info.NoSite), which an older
// answer, lacking, would leave off, and " code-file" since the code is kept in a file of its
// own (codeFilePrefix), so a binary that reads it never decodes an older answer's inline code.
const probeVersion = " site-prefix code-file"

// maxCacheEntries bounds the answers kept: interpreters times versions of the bootstrap.
const maxCacheEntries = 8

func readCache(path string) map[string]cacheEntry {
	entries := map[string]cacheEntry{}
	b, ok := readBounded(path)
	if !ok || json.Unmarshal(b, &entries) != nil {
		return map[string]cacheEntry{}
	}
	return entries
}

// readBounded reads the file at path whole when it holds at most maxCacheBytes; ok is false
// when it cannot be read or holds more.
func readBounded(path string) (b []byte, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err = io.ReadAll(io.LimitReader(f, maxCacheBytes+1))
	return b, err == nil && len(b) <= maxCacheBytes
}

// usableDirs checks what a cache file says before it becomes read-only mounts and Landlock
// rules: absolute, clean paths of directories.
func usableDirs(dirs []string) bool {
	for _, d := range dirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return false
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return false
		}
	}
	return len(dirs) > 0
}

// stamp fingerprints what decides the interpreter's directories: its file, each directory's
// modification time, and the .pth files of its site directories (site-packages,
// dist-packages), which the interpreter reads to add more.
func stamp(python string, dirs []string) string {
	var b strings.Builder
	mark := func(p string) {
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", p, st.Size(), st.ModTime().UnixNano())
		} else {
			fmt.Fprintf(&b, "%s absent\n", p)
		}
	}
	mark(python)
	for _, d := range dirs {
		mark(d)
		if !strings.HasSuffix(d, "-packages") {
			continue
		}
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".pth") {
				mark(filepath.Join(d, e.Name()))
			}
		}
	}
	return b.String()
}

// noCode is an entry's CodeSum when the source did not compile here: an entry that names no
// code file at all was written back by an older binary, which drops the field.
const noCode = "none"

// readCode puts e's compiled code from its code file into e.Info.Code, and reports whether e
// is whole: a code file missing or not the one named (another process's prune, a write cut
// short) makes the answer one to ask again.
func readCode(dir string, e *cacheEntry) bool {
	switch e.CodeSum {
	case noCode:
		return true
	case "":
		// The code inline, or an entry an older binary wrote back without the field: with
		// no code to show for it, asked again.
		return e.Code != ""
	}
	b, ok := readBounded(filepath.Join(dir, codeFilePrefix+e.CodeSum))
	if !ok || codeSum(b) != e.CodeSum {
		return false
	}
	e.Code = string(b)
	return true
}

func codeSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// writeCache writes entries to path, then removes the code files no entry names any more.
// An older binary's entries keep their code inline, as it reads them.
func writeCache(dir, path string, entries map[string]cacheEntry) error {
	b, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	if err := writeAtomic(dir, path, b); err != nil {
		return err
	}
	named := map[string]bool{}
	for _, e := range entries {
		named[codeFilePrefix+e.CodeSum] = true
	}
	names, _ := filepath.Glob(filepath.Join(dir, codeFilePrefix+"*"))
	for _, n := range names {
		// Another writer's temporary file (a suffix after the sum) is left to its writer.
		if base := filepath.Base(n); len(base) == len(codeFilePrefix)+sha256.Size*2 && !named[base] {
			os.Remove(n)
		}
	}
	return nil
}

// writeAtomic writes b to path through a temporary file in dir renamed into place.
func writeAtomic(dir, path string, b []byte) error {
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
