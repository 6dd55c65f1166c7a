package conformance

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// ArtifactsEnv names a directory where CI keeps what the tests produce; the suite's results
// (a checks.json per scenario) and summary.txt go to its conformance/ subdirectory.
const ArtifactsEnv = "MCP_SANDBOX_ARTIFACTS"

// TestOfficialConformanceSuite runs the official suite's active server scenarios against
// `serve --transport http`. The suite itself compares the outcome with baseline.yml: it
// fails on an unlisted failure and on a listed scenario that now passes.
func TestOfficialConformanceSuite(t *testing.T) {
	p := ecoNeedPeers(t)
	base := ecoStartHTTP(t, "testdata/suite.yaml")
	out := t.TempDir()
	if a := os.Getenv(ArtifactsEnv); a != "" {
		out = filepath.Join(a, "conformance")
		if err := os.RemoveAll(out); err != nil {
			t.Fatal(err)
		}
	}
	stdout, runErr := ecoRun(t, 3*time.Minute, p.dir, p.env(), p.node,
		"node_modules/@modelcontextprotocol/conformance/dist/index.js", "server",
		"--url", base+"/mcp", "--expected-failures", "baseline.yml", "-o", out)

	summary, passed, failed := ecoSummarize(t, out)
	summary += fmt.Sprintf("conformance suite: %d of %d scenarios pass; the other %d are expected failures, each with its reason in conformance/baseline.yml\n", passed, passed+failed, failed)
	if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + summary)
	if runErr != nil {
		t.Fatalf("the conformance suite disagrees with baseline.yml: %v\n%s", runErr, ecoTail(stdout, 40))
	}
	// Guard against a silent empty run: the core scenarios must have run and passed.
	for _, s := range []string{"server-initialize", "ping", "tools-list", "logging-set-level"} {
		if !strings.Contains(summary, "scenario passed: "+s+" ") {
			t.Errorf("scenario %s did not run and pass:\n%s", s, summary)
		}
	}
}

// ecoSummarize reads every checks.json under dir: one line per scenario, and scenario counts.
func ecoSummarize(t *testing.T, dir string) (summary string, passed, failed int) {
	t.Helper()
	type check struct {
		ID, Status, ErrorMessage string
	}
	var lines []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		var checks []check
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		// The directory is server-<scenario>-<timestamp>.
		name := strings.TrimPrefix(filepath.Base(filepath.Dir(path)), "server-")
		if i := strings.Index(name, "-20"); i > 0 {
			name = name[:i]
		}
		counts := map[string]int{}
		var why string
		for _, c := range checks {
			counts[c.Status]++
			if c.Status == "FAILURE" && why == "" {
				why = c.ErrorMessage
			}
		}
		// Lower case and indented: a line starting "FAIL " would read like a failed Go
		// package to anything scanning the CI log.
		verdict := "  scenario passed:"
		if counts["FAILURE"] > 0 || counts["SUCCESS"] == 0 {
			verdict = "  scenario failed:"
			failed++
		} else {
			passed++
		}
		lines = append(lines, fmt.Sprintf("%s %s (%d ok, %d failed, %d warnings) %s",
			verdict, name, counts["SUCCESS"], counts["FAILURE"], counts["WARNING"], why))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", passed, failed
}

func ecoTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
