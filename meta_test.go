// Package mcpsandbox_test holds the rules of the house that tests enforce rather than memory:
// who may import whom (DESIGN.md §2) and that every package has a doc.go.
package mcpsandbox_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/mcp-sandbox/mcp-sandbox"

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	GoFiles    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// allowed maps a package (relative to the module; a trailing /* covers its subpackages) to
// the imports it may have besides the standard library. Entries of the module are relative;
// others are module paths (a prefix match).
var allowed = map[string][]string{
	"failure":          {},
	"configs":          {"failure", "go.yaml.in/yaml/v3"},
	"outputs":          {"failure"},
	"engine":           {"failure", "outputs", "engine/wire", "engine/bootstrap"},
	"engine/wire":      {"failure"},
	"engine/bootstrap": {},
	// spawned is the local backends' shared adapter from a started init helper to engine.Child.
	"engine/backend/*":   {"engine", "engine/wire", "failure", "internal/*", "golang.org/x/sys", "engine/backend/spawned"},
	"engine/sandboxtest": {"engine", "failure", "internal/gate"},
	"internal/*": {"internal/*", "golang.org/x/sys",
		// The init helper applies Landlock and seccomp through the libraries DESIGN.md §4 names.
		"github.com/landlock-lsm/go-landlock", "github.com/elastic/go-seccomp-bpf"},
	"budget":    {"failure", "modernc.org/sqlite", "github.com/jackc/pgx", "internal/pgdb"},
	"upstream":  {"failure", "budget", "outputs", "github.com/modelcontextprotocol/go-sdk", "github.com/google/jsonschema-go", "github.com/yosida95/uritemplate"},
	"mcpserver": {"engine", "upstream", "budget", "outputs", "failure", "github.com/modelcontextprotocol/go-sdk", "github.com/google/jsonschema-go"},

	// What the PostgreSQL stores share (a pool opened without leaking the DSN, migrations
	// under an advisory lock), and the tests' helper that gives each test a schema.
	"internal/pgdb":        {"github.com/jackc/pgx"},
	"internal/pgdb/pgtest": {"internal/gate", "github.com/jackc/pgx"},
	// The blob store on PostgreSQL is an adapter beside outputs, so the engine (which imports
	// outputs) never links a database driver; blobtest is the contract every store passes.
	"outputs/pgblob":   {"outputs", "failure", "internal/pgdb", "github.com/jackc/pgx"},
	"outputs/blobtest": {"outputs", "github.com/google/go-cmp"},
}

func rulesFor(rel string) ([]string, bool) {
	if r, ok := allowed[rel]; ok {
		return r, true
	}
	for k, r := range allowed {
		if strings.HasSuffix(k, "/*") && strings.HasPrefix(rel, strings.TrimSuffix(k, "*")) {
			return r, true
		}
	}
	return nil, false
}

func permitted(imp string, rules []string) bool {
	if !strings.Contains(strings.Split(imp, "/")[0], ".") {
		return true // the standard library
	}
	for _, r := range rules {
		full := r
		if !strings.Contains(strings.Split(r, "/")[0], ".") {
			full = module + "/" + r
		}
		if strings.HasSuffix(full, "/*") {
			if strings.HasPrefix(imp, strings.TrimSuffix(full, "*")) {
				return true
			}
			continue
		}
		if imp == full || strings.HasPrefix(imp, full+"/") && !strings.HasPrefix(full, module) {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" || strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "conformance") || strings.HasPrefix(rel, "benchmarks") {
			continue
		}
		rules, ok := rulesFor(rel)
		if !ok {
			t.Errorf("package %s has no import rule: add it to DESIGN.md §2 and to this test", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !permitted(imp, rules) {
				t.Errorf("%s imports %s, which DESIGN.md §2 does not allow", rel, imp)
			}
		}
	}
}

func TestEveryPackageHasADoc(t *testing.T) {
	for _, p := range listPackages(t) {
		if len(p.GoFiles) == 0 {
			continue
		}
		if _, err := os.Stat(path.Join(p.Dir, "doc.go")); err != nil {
			t.Errorf("package %s has no doc.go", p.ImportPath)
		}
	}
}

// TestNoStdoutOutsideCmd: a stray byte on stdout corrupts the stdio MCP transport.
func TestNoStdoutOutsideCmd(t *testing.T) {
	out, _ := exec.Command("git", "grep", "-nE", `\bfmt\.Print(ln|f)?\(|os\.Stdout`, "--", "*.go",
		":!cmd/**", ":!**/*_test.go", ":!conformance/**", ":!benchmarks/**").Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("writes to stdout outside cmd/:\n%s", s)
	}
}
