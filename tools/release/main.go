package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	project = "mcp-sandbox"
	mainPkg = "./cmd/mcp-sandbox"
)

// targets are the platforms a release covers, in the order they are built.
var targets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// artifact is one entry of artifacts.json, in the shape goreleaser wrote it (the fields
// deploy/mcpb/stage.mjs and the packaging steps read).
type artifact struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	GOOS   string `json:"goos,omitempty"`
	GOARCH string `json:"goarch,omitempty"`
	Type   string `json:"type"` // Binary, Archive or Checksum
}

func main() {
	version := flag.String("version", "", "the release's version, as the archives' names and metadata.json carry it")
	ldflags := flag.String("ldflags", "", "the linker flags of every binary (make dist stamps the version with -X)")
	out := flag.String("o", "dist", "the directory to write (emptied first)")
	overlays := flag.String("overlays", "bin/init-helper", "the directory holding each target's <os>_<arch>/overlay.json")
	only := flag.String("targets", strings.Join(targets, ","), "the comma-separated os/arch targets to build")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: release -version V [-ldflags F] [-o DIR] [-overlays DIR] [-targets os/arch,...] [FILE[=NAME] ...]")
		fmt.Fprintln(os.Stderr, "Builds one binary per target and packs it with each FILE (a path relative to the module's root,")
		fmt.Fprintln(os.Stderr, "packed under that path, or under NAME when one is given).")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := release(*version, *ldflags, *out, *overlays, strings.Split(*only, ","), flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// packed is one file an archive holds beside the binary: where it is read from, and its name
// in the archive.
type packed struct{ src, name string }

func release(version, ldflags, out, overlays string, want, args []string) error {
	var files []packed
	for _, a := range args {
		src, name, ok := strings.Cut(a, "=")
		if !ok {
			name = filepath.ToSlash(src)
		}
		if st, err := os.Stat(src); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file to pack (paths are relative to the module's root)", src)
		}
		files = append(files, packed{src, name})
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	mtime := time.Now()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", s)
		}
		mtime = time.Unix(n, 0)
	}
	var made []artifact
	var sums []string
	for _, t := range want {
		goos, goarch, ok := strings.Cut(t, "/")
		if !ok || !slices.Contains(targets, t) {
			return fmt.Errorf("unknown target %q (known: %s)", t, strings.Join(targets, ", "))
		}
		bin, err := build(goos, goarch, ldflags, out, overlays)
		if err != nil {
			return err
		}
		made = append(made, artifact{Name: filepath.Base(bin), Path: bin, GOOS: goos, GOARCH: goarch, Type: "Binary"})
		name := fmt.Sprintf("%s_%s_%s_%s", project, version, goos, goarch)
		archive := filepath.Join(out, name+".tar.gz")
		if goos == "windows" {
			archive = filepath.Join(out, name+".zip")
		}
		err = pack(archive, bin, files, mtime)
		if err != nil {
			return fmt.Errorf("packing %s: %v", archive, err)
		}
		sum, err := sha256File(archive)
		if err != nil {
			return err
		}
		sums = append(sums, sum+"  "+filepath.Base(archive))
		made = append(made, artifact{Name: filepath.Base(archive), Path: archive, GOOS: goos, GOARCH: goarch, Type: "Archive"})
	}
	slices.SortFunc(sums, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	checksums := filepath.Join(out, "checksums.txt")
	if err := os.WriteFile(checksums, []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	made = append(made, artifact{Name: "checksums.txt", Path: checksums, Type: "Checksum"})
	if err := writeJSON(filepath.Join(out, "artifacts.json"), made); err != nil {
		return err
	}
	return writeJSON(filepath.Join(out, "metadata.json"), map[string]string{"project_name": project, "version": version})
}

// build builds one target's binary into OUT/mcp-sandbox_<os>_<arch>/, with the init helper's
// overlay of that target (make helper-overlays writes them).
func build(goos, goarch, ldflags, out, overlays string) (string, error) {
	overlay := filepath.Join(overlays, goos+"_"+goarch, "overlay.json")
	if _, err := os.Stat(overlay); err != nil {
		return "", fmt.Errorf("no %s: run make helper-overlays first", overlay)
	}
	name := project
	if goos == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(out, fmt.Sprintf("%s_%s_%s", project, goos, goarch), name)
	fmt.Fprintf(os.Stderr, "release: building %s/%s\n", goos, goarch)
	cmd := exec.Command("go", "build", "-trimpath", "-overlay="+overlay, "-ldflags="+ldflags, "-o", bin, mainPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s/%s: %v", goos, goarch, err)
	}
	return bin, nil
}

// pack writes the archive: the binary at its root and each file under its name, as a zip for
// Windows and a gzipped tar otherwise.
func pack(archive, bin string, files []packed, mtime time.Time) error {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	var add func(name string, mode int64, b []byte) error
	var closers []io.Closer
	if strings.HasSuffix(archive, ".zip") {
		zw := zip.NewWriter(f)
		add = func(name string, mode int64, b []byte) error {
			h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: mtime}
			h.SetMode(os.FileMode(mode))
			w, err := zw.CreateHeader(h)
			if err == nil {
				_, err = w.Write(b)
			}
			return err
		}
		closers = []io.Closer{zw}
	} else {
		gz := gzip.NewWriter(f)
		tw := tar.NewWriter(gz)
		add = func(name string, mode int64, b []byte) error {
			h := &tar.Header{Name: name, Mode: mode, Size: int64(len(b)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
			err := tw.WriteHeader(h)
			if err == nil {
				_, err = tw.Write(b)
			}
			return err
		}
		closers = []io.Closer{tw, gz}
	}
	entries := append([]packed{{src: bin, name: filepath.Base(bin)}}, files...)
	for i, e := range entries {
		b, err := os.ReadFile(e.src)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if i == 0 {
			mode = 0o755
		}
		if err := add(e.name, mode, b); err != nil {
			return err
		}
	}
	for _, c := range closers {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return f.Close()
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
