package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestLinkerSetsTheVersion pins the -X flag of every build that stamps a version (make build,
// the release) to internal/early's Version: the linker ignores an -X naming a variable that
// does not exist, so a stale path (main.Version, before the version moved there) would ship
// "dev" without a word.
func TestLinkerSetsTheVersion(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./internal/early").Output()
	if err != nil {
		t.Fatalf("go list ./internal/early: %v", err)
	}
	want := strings.TrimSpace(string(out)) + ".Version"
	flagRE := regexp.MustCompile(`-X\s+([^=\s]+)=`)
	for _, name := range []string{"../../Makefile"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		found := flagRE.FindAllStringSubmatch(string(b), -1)
		if len(found) == 0 {
			t.Errorf("%s: no -X flag stamps the version", name)
		}
		for _, m := range found {
			if m[1] != want {
				t.Errorf("%s: -X %s; the version is %s", name, m[1], want)
			}
		}
	}
}
