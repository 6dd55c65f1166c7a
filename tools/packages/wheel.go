package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// wheelName is the distribution's name as a wheel's file and directories spell it (PEP 427,
// PEP 503 normalised, '-' as '_'); the project's name is mcp-sandbox.
const wheelName = "mcp_sandbox"

// pep440 is a semantic version as PEP 440 has it: 1.2.3 stays; a pre-release or snapshot
// (1.2.3-snapshot-abc1234-dirty) is a development release of it with the rest as a local
// version label (1.2.3.dev0+snapshot.abc1234.dirty), which pip installs and PyPI refuses, as
// a snapshot should be.
func pep440(version string) (string, error) {
	m := regexp.MustCompile(`^v?(\d+\.\d+\.\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$`).FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("version %q is not a semantic version", version)
	}
	if m[2] == "" {
		return m[1], nil
	}
	local := strings.Trim(regexp.MustCompile(`[^0-9A-Za-z]+`).ReplaceAllString(m[2], "."), ".")
	return m[1] + ".dev0+" + strings.ToLower(local), nil
}

// The Python package beside the script: `python -m mcp_sandbox` runs the binary, and
// mcp_sandbox.find_binary() names it for a program that wants its path.
const (
	pyInit = `"""mcp-sandbox: an MCP server that runs model-written Python programs in a contained child
process. The wheel installs the binary as the script mcp-sandbox; find_binary() returns its path."""

import os
import sys
import sysconfig


def find_binary():
    """The mcp-sandbox binary this wheel installed."""
    exe = "mcp-sandbox" + (sysconfig.get_config_var("EXE") or "")
    candidates = [os.path.join(sysconfig.get_path("scripts"), exe)]
    user = sysconfig.get_path("scripts", os.name + "_user") if os.name + "_user" in sysconfig.get_scheme_names() else None
    if user:
        candidates.append(os.path.join(user, exe))
    candidates.append(os.path.join(os.path.dirname(sys.executable), exe))
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError("the mcp-sandbox binary is not where this wheel installs it: " + ", ".join(candidates))
`
	pyMain = `import os
import subprocess
import sys

from mcp_sandbox import find_binary

if __name__ == "__main__":
    binary = find_binary()
    if os.name == "nt":
        sys.exit(subprocess.call([binary, *sys.argv[1:]]))
    os.execv(binary, [binary, *sys.argv[1:]])
`
)

// writeWheels writes one wheel per platform into dir.
func writeWheels(dir, version string, ps []platform) error {
	v, err := pep440(version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range ps {
		path, err := writeWheel(dir, v, p)
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", path)
	}
	return nil
}

// writeWheel writes p's wheel: the binary under .data/scripts (pip installs it executable
// into the environment's bin, or Scripts), the Python package, and .dist-info with METADATA,
// WHEEL and RECORD (each file's sha256 and size; RECORD's own line without).
func writeWheel(dir, version string, p platform) (string, error) {
	tag := "py3-none-" + strings.Join(p.wheelTags, ".")
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.whl", wheelName, version, tag))
	binary, err := os.ReadFile(p.path)
	if err != nil {
		return "", err
	}
	info := fmt.Sprintf("%s-%s.dist-info", wheelName, version)
	metadata := fmt.Sprintf(`Metadata-Version: 2.1
Name: mcp-sandbox
Version: %s
Summary: %s
Home-page: %s
Project-URL: Source, %s
Requires-Python: >=3.8
Description-Content-Type: text/markdown

# mcp-sandbox

%s

This wheel carries the %s/%s binary: pip install (or uvx) puts mcp-sandbox on PATH.

    uvx mcp-sandbox serve                      # an MCP server over stdio
    echo '6*7' | mcp-sandbox run -             # one program, its result as JSON

Programs run under the machine's python3, not this package's interpreter.
`, version, description, homepage, homepage, description, p.goos, p.goarch)
	var wheel strings.Builder
	wheel.WriteString("Wheel-Version: 1.0\nGenerator: mcp-sandbox packages\nRoot-Is-Purelib: false\n")
	for _, t := range p.wheelTags {
		wheel.WriteString("Tag: py3-none-" + t + "\n")
	}
	files := []struct {
		name string
		mode os.FileMode
		data []byte
	}{
		{wheelName + "/__init__.py", 0o644, []byte(pyInit)},
		{wheelName + "/__main__.py", 0o644, []byte(pyMain)},
		{fmt.Sprintf("%s-%s.data/scripts/%s", wheelName, version, p.exe()), 0o755, binary},
		{info + "/METADATA", 0o644, []byte(metadata)},
		{info + "/WHEEL", 0o644, []byte(wheel.String())},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		if err := addZip(zw, f.name, f.mode, f.data); err != nil {
			return "", err
		}
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.data))
	}
	record.WriteString(info + "/RECORD,,\n")
	if err := addZip(zw, info+"/RECORD", 0o644, []byte(record.String())); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, buf.Bytes(), 0o644)
}

func addZip(zw *zip.Writer, name string, mode os.FileMode, data []byte) error {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	h.SetMode(mode)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, bytes.NewReader(data))
	return err
}
