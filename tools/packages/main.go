package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// platform is one binary of the dist, as each package manager names its platform.
type platform struct {
	goos, goarch  string
	path          string // the binary in the dist
	npmOS, npmCPU string
	wheelTags     []string // the wheel's platform tags, most general last
}

// platforms are the targets make dist builds (tools/release). Linux
// binaries are static (no cgo), so one wheel serves glibc and musl alike. Go 1.26 runs on macOS 12 and later.
var platforms = []platform{
	{goos: "linux", goarch: "amd64", npmOS: "linux", npmCPU: "x64", wheelTags: []string{"manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"}},
	{goos: "linux", goarch: "arm64", npmOS: "linux", npmCPU: "arm64", wheelTags: []string{"manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"}},
	{goos: "darwin", goarch: "amd64", npmOS: "darwin", npmCPU: "x64", wheelTags: []string{"macosx_12_0_x86_64"}},
	{goos: "darwin", goarch: "arm64", npmOS: "darwin", npmCPU: "arm64", wheelTags: []string{"macosx_12_0_arm64"}},
	{goos: "windows", goarch: "amd64", npmOS: "win32", npmCPU: "x64", wheelTags: []string{"win_amd64"}},
	{goos: "windows", goarch: "arm64", npmOS: "win32", npmCPU: "arm64", wheelTags: []string{"win_arm64"}},
}

// exe is the binary's name on the platform.
func (p platform) exe() string {
	if p.goos == "windows" {
		return "mcp-sandbox.exe"
	}
	return "mcp-sandbox"
}

// The project's home, which every package names as where it comes from.
const (
	homepage    = "https://github.com/mcp-sandbox/mcp-sandbox"
	description = "An MCP server that runs model-written Python programs in a contained child process: run_code, with an honest report of what isolation held."
)

func main() {
	dist := flag.String("dist", "dist", "make dist's directory")
	npmDir := flag.String("npm", "", "stage the npm packages here, one directory each")
	wheelDir := flag.String("wheels", "", "write the wheels here")
	flag.Parse()
	if flag.NArg() > 0 || *npmDir == "" && *wheelDir == "" {
		fmt.Fprintln(os.Stderr, "usage: packages -dist DIST [-npm DIR] [-wheels DIR]")
		os.Exit(2)
	}
	version, ps, err := readDist(*dist)
	if err == nil && *npmDir != "" {
		err = stageNPM(*npmDir, version, ps)
	}
	if err == nil && *wheelDir != "" {
		err = writeWheels(*wheelDir, version, ps)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "packages:", err)
		os.Exit(1)
	}
}

// readDist returns the dist's version and the binary of each platform; a platform missing is
// an error, so no package names a platform package that was never made.
func readDist(dist string) (string, []platform, error) {
	var meta struct {
		Version string `json:"version"`
	}
	if err := readJSON(filepath.Join(dist, "metadata.json"), &meta); err != nil {
		return "", nil, fmt.Errorf("%w (run make dist first)", err)
	}
	var artifacts []struct {
		Type, Path, Goos, Goarch string
	}
	if err := readJSON(filepath.Join(dist, "artifacts.json"), &artifacts); err != nil {
		return "", nil, fmt.Errorf("%w (run make dist first)", err)
	}
	var out []platform
	for _, p := range platforms {
		for _, a := range artifacts {
			if a.Type == "Binary" && a.Goos == p.goos && a.Goarch == p.goarch {
				p.path = a.Path
				if !filepath.IsAbs(p.path) {
					p.path = filepath.Join(filepath.Dir(dist), p.path)
				}
			}
		}
		if p.path == "" {
			return "", nil, fmt.Errorf("%s/artifacts.json has no binary for %s/%s", dist, p.goos, p.goarch)
		}
		out = append(out, p)
	}
	if meta.Version == "" {
		return "", nil, fmt.Errorf("%s/metadata.json names no version", dist)
	}
	return meta.Version, out, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
