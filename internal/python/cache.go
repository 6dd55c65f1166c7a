package python

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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

// cacheEntry is one interpreter's answer and what it was stamped with.
type cacheEntry struct {
	Info
	Stamp  string `json:"stamp"`  // the interpreter's file, and every directory and .pth file listed
	Source string `json:"source"` // the SHA-256 of the source compiled
	Probed int64  `json:"probed"` // unix seconds
}

// InspectCached is Inspect, remembered in dir/CacheFile: asking an interpreter means starting
// it, which costs as much as the program a one-shot command runs. An answer is used for the
// same source while the interpreter's file, the directories it listed and the .pth files in
// its site directories (which can add directories) are unchanged, and for cacheTTL at most;
// otherwise the interpreter is asked again and the file rewritten (atomically; a failed write
// only costs the next start a probe). dir "" means no cache: Inspect.
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
		usableDirs(e.Dirs) && stamp(python, e.Dirs) == e.Stamp {
		return e.Info, nil
	}
	info, err := Inspect(ctx, python, source)
	if err != nil {
		return Info{}, err
	}
	entries[key] = cacheEntry{Info: info, Stamp: stamp(python, info.Dirs), Source: src, Probed: time.Now().Unix()}
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
// answer, lacking, would leave off.
const probeVersion = " site-prefix"

// maxCacheEntries bounds the answers kept: interpreters times versions of the bootstrap.
const maxCacheEntries = 8

func readCache(path string) map[string]cacheEntry {
	entries := map[string]cacheEntry{}
	f, err := os.Open(path)
	if err != nil {
		return entries
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCacheBytes+1))
	if err != nil || len(b) > maxCacheBytes || json.Unmarshal(b, &entries) != nil {
		return map[string]cacheEntry{}
	}
	return entries
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

func writeCache(dir, path string, entries map[string]cacheEntry) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, CacheFile+".*")
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
