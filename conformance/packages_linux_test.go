package conformance

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// distEnv names a dist/ of make dist whose packages make npm and make wheel already made (CI
// makes them before its conformance step and sets it): the tests below install those. Unset,
// they make packages of their own, with the same packager, from a dist of this build's binary.
const distEnv = "MCP_SANDBOX_DIST"

// packaged is what the package tests install: npm's tarballs and the wheels.
type packaged struct {
	tarballs, wheels []string
}

// packages returns the packages to install (see distEnv). A dist of the test's own holds this
// build's binary for this machine and, for every other platform, a stand-in that fails
// saying it is the wrong platform's: a package manager that picked the wrong package fails
// the test.
func packages(t *testing.T) packaged {
	t.Helper()
	if dist := os.Getenv(distEnv); dist != "" {
		var p packaged
		p.tarballs, _ = filepath.Glob(filepath.Join(dist, "npm", "*.tgz"))
		p.wheels, _ = filepath.Glob(filepath.Join(dist, "wheels", "*.whl"))
		if len(p.tarballs) != 7 || len(p.wheels) != 6 {
			t.Fatalf("%s=%s holds %d npm tarballs and %d wheels, want 7 and 6 (make npm wheel)", distEnv, dist, len(p.tarballs), len(p.wheels))
		}
		return p
	}
	gate.AppliesOnly(t, runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"), "the packages are tried on linux, amd64 or arm64")
	dist := t.TempDir()
	wrong := filepath.Join(dist, "wrong-platform")
	if err := os.WriteFile(wrong, []byte("#!/bin/sh\necho \"the wrong platform's binary ran\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var artifacts []map[string]string
	for _, goos := range []string{"linux", "darwin", "windows"} {
		for _, goarch := range []string{"amd64", "arm64"} {
			path := wrong
			if goos == runtime.GOOS && goarch == runtime.GOARCH {
				path = built.sandbox
			}
			artifacts = append(artifacts, map[string]string{"type": "Binary", "goos": goos, "goarch": goarch, "path": path})
		}
	}
	for name, v := range map[string]any{"artifacts.json": artifacts, "metadata.json": map[string]string{"version": "0.0.0-conformance"}} {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dist, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npmDir, wheelDir := filepath.Join(dist, "npm"), filepath.Join(dist, "wheels")
	cmd := exec.Command("go", "run", "./tools/packages", "-dist", dist, "-npm", npmDir, "-wheels", wheelDir)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the packager: %v\n%s", err, out)
	}
	dirs, _ := filepath.Glob(filepath.Join(npmDir, "*", "package.json"))
	for _, d := range dirs {
		if out, err := exec.Command("npm", "pack", "--silent", "--pack-destination", npmDir, filepath.Dir(d)).CombinedOutput(); err != nil {
			t.Fatalf("npm pack %s: %v\n%s", filepath.Dir(d), err, out)
		}
	}
	var p packaged
	p.tarballs, _ = filepath.Glob(filepath.Join(npmDir, "*.tgz"))
	p.wheels, _ = filepath.Glob(filepath.Join(wheelDir, "*.whl"))
	return p
}

// userPath is a directory of links to what a user has (node, npm, npx, sh, python3 and what
// else is named) and nothing more: Go is not among them.
func userPath(t *testing.T, names map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, target := range names {
		if target == "" {
			p, err := exec.LookPath(name)
			gate.Require(t, "npm-peers", err == nil, name+" is not on PATH: "+fmtErr(err))
			target = p
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// registry writes an npm registry of tarballs into a directory, as loopback-only.py serves it
// at http://127.0.0.1:port/: a packument per package (its package.json as the version's
// manifest, os and cpu included, which npm decides by before it fetches) and the tarballs.
func registry(t *testing.T, tarballs []string, port int) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "-"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tgz := range tarballs {
		b, err := os.ReadFile(tgz)
		if err != nil {
			t.Fatal(err)
		}
		var manifest map[string]any
		if err := json.Unmarshal(packageJSONOf(t, tgz), &manifest); err != nil {
			t.Fatal(err)
		}
		name, version := manifest["name"].(string), manifest["version"].(string)
		s512, s1 := sha512.Sum512(b), sha1.Sum(b)
		manifest["dist"] = map[string]string{
			"tarball":   fmt.Sprintf("http://127.0.0.1:%d/-/%s", port, filepath.Base(tgz)),
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(s512[:]),
			"shasum":    hex.EncodeToString(s1[:]),
		}
		doc, _ := json.Marshal(map[string]any{"name": name, "dist-tags": map[string]string{"latest": version},
			"versions": map[string]any{version: manifest}})
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), doc, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "-", filepath.Base(tgz)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// packageJSONOf reads package/package.json out of an npm tarball.
func packageJSONOf(t *testing.T, tgz string) []byte {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s holds no package/package.json: %v", tgz, err)
		}
		if h.Name == "package/package.json" {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// sixTimesSeven checks `run -` of 6*7 answered 42.
func sixTimesSeven(t *testing.T, how string, out []byte, err error) {
	t.Helper()
	var r struct {
		Value   json.RawMessage `json:"value"`
		Failure any             `json:"failure"`
	}
	if err != nil || json.Unmarshal(out, &r) != nil || string(r.Value) != "42" || r.Failure != nil {
		t.Fatalf("%s: %v\n%s", how, err, out)
	}
}

// TestPackagesOffline: the npm packages and the wheels, made once, each installed as its users
// install it, with no network and no Go (subtests npx and wheel).
func TestPackagesOffline(t *testing.T) {
	pkgs := packages(t)
	t.Run("npx", func(t *testing.T) { npxOffline(t, pkgs) })
	t.Run("wheel", func(t *testing.T) { wheelInAFreshVenv(t, pkgs) })
}

// npxOffline (issue 37, Must show 1): the npm packages, served by a registry of the test's
// own on the loopback of a network namespace nothing else is in, with Go nowhere on PATH and
// an empty HOME (npx's cache and prefix): `npx -y @mcp-sandbox/mcp-sandbox run -` of 6*7
// prints 42, npm having installed this platform's package only; Claude Code, given `claude
// mcp add sandbox -- npx -y @mcp-sandbox/mcp-sandbox serve`, lists it connected; and a
// program runs through that same line as an MCP client starts it.
func npxOffline(t *testing.T, pkgs packaged) {
	peers := ecoNeedPeers(t)
	const port = 4873
	reg := registry(t, pkgs.tarballs, port)
	path := userPath(t, map[string]string{"node": peers.node, "npm": "", "npx": "", "sh": "", "bash": "", "python3": "/usr/bin/python3"})
	claude := newOfflineClaude(t)
	claude.path = path // nothing but the user's tools
	npmEnv := []string{fmt.Sprintf("npm_config_registry=http://127.0.0.1:%d/", port), "npm_config_update_notifier=false",
		"npm_config_audit=false", "npm_config_fund=false", "npm_config_yes=true"}
	env := claude.env(npmEnv...)
	const pkg = "@mcp-sandbox/mcp-sandbox"

	cmd := offlineCommand(t, reg, port, "npx", "-y", pkg, "run", "-")
	cmd.Dir, cmd.Env, cmd.Stdin = claude.home, env, strings.NewReader("6*7")
	cmd.Stderr = testkit.NewLog(t, "npx")
	out, err := cmd.Output()
	sixTimesSeven(t, "npx -y "+pkg+" run - of 6*7", out, err)
	installed, _ := filepath.Glob(filepath.Join(claude.home, ".npm", "_npx", "*", "node_modules", "@mcp-sandbox", "*"))
	var names []string
	for _, p := range installed {
		names = append(names, filepath.Base(p))
	}
	want := "linux-x64"
	if runtime.GOARCH == "arm64" {
		want = "linux-arm64"
	}
	if len(names) != 2 || !strings.Contains(strings.Join(names, " "), want) {
		t.Errorf("npx installed %v of the scope, want mcp-sandbox and %s only", names, want)
	}

	claude.run(t, reg, port, npmEnv, "mcp", "add", "sandbox", "--", "npx", "-y", pkg, "serve")
	list := claude.run(t, reg, port, npmEnv, "mcp", "list")
	t.Logf("claude mcp list:\n%s", list)
	if !connected(list, "sandbox") {
		t.Errorf("claude mcp list does not show npx -y %s serve connected:\n%s", pkg, list)
	}

	serve := offlineCommand(t, reg, port, "npx", "-y", pkg, "serve")
	serve.Dir, serve.Env, serve.Stderr = claude.home, env, testkit.NewLog(t, "npx serve")
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(2*time.Minute))
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "npx-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: serve}, nil)
	if err != nil {
		t.Fatalf("an MCP client on npx -y %s serve: %v", pkg, err)
	}
	defer cs.Close()
	var v int
	run(t, cs, "6*7", &v)
	if v != 42 {
		t.Errorf("run_code through npx answered %d", v)
	}
}

// wheelInAFreshVenv (issue 37, Must show 2): this platform's wheel, pip-installed with no
// index into a fresh virtual environment, puts mcp-sandbox in its bin: `run -` of 6*7 prints
// 42, and `python -m mcp_sandbox` runs the same binary.
func wheelInAFreshVenv(t *testing.T, pkgs packaged) {
	python := "/usr/bin/python3"
	probe := exec.Command(python, "-c", "import venv, ensurepip")
	gate.Require(t, "python-venv", probe.Run() == nil, python+" cannot make a virtual environment with pip (apt-get install python3-venv)")
	tag := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	var wheel string
	for _, w := range pkgs.wheels {
		if strings.Contains(filepath.Base(w), "manylinux_2_17_"+tag) {
			wheel = w
		}
	}
	if wheel == "" {
		t.Fatalf("no wheel for linux %s among %v", tag, pkgs.wheels)
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(python, "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	install := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--disable-pip-version-check", wheel)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("pip install --no-index %s: %v\n%s", filepath.Base(wheel), err, out)
	}
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + filepath.Join(venv, "bin") + ":/usr/bin:/bin", "XDG_STATE_HOME=" + home}
	cmd := exec.Command(filepath.Join(venv, "bin", "mcp-sandbox"), "run", "-")
	cmd.Env, cmd.Stdin, cmd.Stderr = env, strings.NewReader("6*7"), testkit.NewLog(t, "mcp-sandbox")
	out, err := cmd.Output()
	sixTimesSeven(t, "the wheel's mcp-sandbox run - of 6*7", out, err)
	mod := exec.Command(filepath.Join(venv, "bin", "python"), "-m", "mcp_sandbox", "version")
	mod.Env = env
	if out, err := mod.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "mcp-sandbox ") {
		t.Errorf("python -m mcp_sandbox version: %v\n%s", err, out)
	}
}
