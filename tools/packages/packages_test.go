package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPEP440(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3":                        "1.2.3",
		"v1.2.3":                       "1.2.3",
		"0.0.0-snapshot-d3594d1-dirty": "0.0.0.dev0+snapshot.d3594d1.dirty",
		"1.2.3-rc.1":                   "1.2.3.dev0+rc.1",
	} {
		if got, err := pep440(in); err != nil || got != want {
			t.Errorf("pep440(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := pep440("d3594d1"); err == nil {
		t.Error("a bare commit was taken for a version")
	}
}

// fakeDist writes a dist/ whose binaries are small files naming their platform.
func fakeDist(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	var artifacts []map[string]string
	for _, p := range platforms {
		path := filepath.Join(dist, p.goos+"_"+p.goarch, p.exe())
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(p.goos+"/"+p.goarch), 0o755); err != nil {
			t.Fatal(err)
		}
		artifacts = append(artifacts, map[string]string{"type": "Binary", "goos": p.goos, "goarch": p.goarch, "path": path})
	}
	for name, v := range map[string]any{"artifacts.json": artifacts, "metadata.json": map[string]string{"version": "1.2.3"}} {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dist, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dist
}

// Each wheel holds its own platform's binary as an executable script, and RECORD names every
// other file with its true sha256 and size.
func TestWheels(t *testing.T) {
	version, ps, err := readDist(fakeDist(t))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := writeWheels(out, version, ps); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		name := filepath.Join(out, fmt.Sprintf("mcp_sandbox-1.2.3-py3-none-%s.whl", strings.Join(p.wheelTags, ".")))
		zr, err := zip.OpenReader(name)
		if err != nil {
			t.Fatalf("%s: %v", p.goos+"/"+p.goarch, err)
		}
		files := map[string][]byte{}
		for _, f := range zr.File {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			files[f.Name] = b
			if strings.Contains(f.Name, ".data/scripts/") && f.Mode()&0o111 == 0 {
				t.Errorf("%s: %s is not executable (%v)", name, f.Name, f.Mode())
			}
		}
		zr.Close()
		script := "mcp_sandbox-1.2.3.data/scripts/" + p.exe()
		if string(files[script]) != p.goos+"/"+p.goarch {
			t.Errorf("%s holds %q as its script, want the %s/%s binary", name, files[script], p.goos, p.goarch)
		}
		record := string(files["mcp_sandbox-1.2.3.dist-info/RECORD"])
		for f, b := range files {
			sum := sha256.Sum256(b)
			line := fmt.Sprintf("%s,sha256=%s,%d", f, base64.RawURLEncoding.EncodeToString(sum[:]), len(b))
			if strings.HasSuffix(f, "/RECORD") {
				line = f + ",,"
			}
			if !strings.Contains(record, line+"\n") {
				t.Errorf("%s: RECORD lacks %q:\n%s", name, line, record)
			}
		}
		for _, tag := range p.wheelTags {
			if !strings.Contains(string(files["mcp_sandbox-1.2.3.dist-info/WHEEL"]), "Tag: py3-none-"+tag+"\n") {
				t.Errorf("%s: WHEEL lacks tag %s", name, tag)
			}
		}
	}
}

// The main npm package depends on every platform package at its own version, and each platform
// package holds its binary and says which os and cpu npm may install it on.
func TestNPMPackages(t *testing.T) {
	version, ps, err := readDist(fakeDist(t))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := stageNPM(out, version, ps); err != nil {
		t.Fatal(err)
	}
	var top packageJSON
	b, _ := os.ReadFile(filepath.Join(out, "mcp-sandbox", "package.json"))
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if top.Name != npmMain || top.Bin["mcp-sandbox"] != "bin/mcp-sandbox.js" || len(top.OptionalDependencies) != len(ps) {
		t.Errorf("main package: %s", b)
	}
	for _, p := range ps {
		var pj packageJSON
		b, _ := os.ReadFile(filepath.Join(out, p.npmOS+"-"+p.npmCPU, "package.json"))
		if err := json.Unmarshal(b, &pj); err != nil {
			t.Fatal(err)
		}
		if top.OptionalDependencies[pj.Name] != "1.2.3" || len(pj.OS) != 1 || pj.OS[0] != p.npmOS || len(pj.CPU) != 1 || pj.CPU[0] != p.npmCPU {
			t.Errorf("%s: %s", p.goos+"/"+p.goarch, b)
		}
		bin, err := os.ReadFile(filepath.Join(out, p.npmOS+"-"+p.npmCPU, "bin", p.exe()))
		if err != nil || string(bin) != p.goos+"/"+p.goarch {
			t.Errorf("%s: binary %q, %v", pj.Name, bin, err)
		}
	}
}
