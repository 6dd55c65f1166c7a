package configs

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package imports only what docs/design.md §2 allows it, and writes nothing to stdout.
func TestImportRules(t *testing.T) {
	allowed := map[string]bool{
		"github.com/mcp-sandbox/mcp-sandbox/failure":          true,
		"github.com/mcp-sandbox/mcp-sandbox/egress":           true, // the network rule language, a leaf
		"github.com/mcp-sandbox/mcp-sandbox/internal/nearest": true, // "did you mean", a leaf
		"go.yaml.in/yaml/v3":                                  true,
	}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"os.Stdout", "fmt.Print", "println(", "log.Print"} {
			if strings.Contains(string(src), banned) {
				t.Errorf("%s uses %s: library code never writes to stdout (it would corrupt the stdio transport)", name, banned)
			}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			stdlib := !strings.Contains(strings.Split(p, "/")[0], ".")
			if !stdlib && !allowed[p] {
				t.Errorf("%s imports %s; configs may import only failure, egress, internal/nearest, the standard library and yaml", name, p)
			}
		}
	}
}
