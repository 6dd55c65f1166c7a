package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

const (
	helperPkg   = "./internal/inithelper/helper"
	embedPkg    = "./internal/inithelper"
	embeddedDir = "embedded" // inithelper's go:embed directory
)

func main() {
	goos := flag.String("goos", runtime.GOOS, "the target's GOOS (that of the mcp-sandbox build the overlay is for)")
	goarch := flag.String("goarch", runtime.GOARCH, "the target's GOARCH")
	out := flag.String("o", "", "the directory to write the helper, its digest and overlay.json to (made if missing)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: overlay [-goos GOOS] [-goarch GOARCH] -o DIR")
		os.Exit(2)
	}
	if err := write(*goos, *goarch, *out); err != nil {
		fmt.Fprintln(os.Stderr, "overlay:", err)
		os.Exit(1)
	}
}

func write(goos, goarch, out string) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	replace := map[string]string{}
	if goos == "linux" {
		dir, err := exec.Command("go", "list", "-f", "{{.Dir}}", embedPkg).Output()
		if err != nil {
			return fmt.Errorf("go list %s: %v (run it in the module's root)", embedPkg, err)
		}
		embedded := filepath.Join(strings.TrimSpace(string(dir)), embeddedDir)
		bin := filepath.Join(out, "init")
		// Static (no cgo: no dynamic loader at each start), without symbol tables, and with no
		// path of this machine in it.
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, helperPkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the init helper for %s/%s: %v", goos, goarch, err)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		digest := filepath.Join(out, "init.sha256")
		if err := os.WriteFile(digest, []byte(hex.EncodeToString(sum[:])), 0o644); err != nil {
			return err
		}
		replace[filepath.Join(embedded, "init")] = bin
		replace[filepath.Join(embedded, "init.sha256")] = digest
	}
	j, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "overlay.json"), j, 0o644)
}
