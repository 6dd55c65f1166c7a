package mcpsandbox_test

// The rules of one vocabulary (issue 22): the engine says what the sandbox saw and nothing of
// the host's concerns, and each frame, a call's answer and a handle have one definition.
//
//   - TestEngineKnowsNoHost: no package under engine/ or remote/ (an engine elsewhere: the
//     remote client and the sandbox service) depends, even indirectly, on budget, binding,
//     upstream, execution or mcpserver, and none declares a name (or a JSON key) of budgets,
//     approvals or upstream servers.
//   - TestOneDefinitionOfEachFrame: no package under engine/ or remote/ but engine/wire
//     declares a struct named like one of engine/wire's types (frames.go), and the types
//     retired by that move stay retired.
//   - TestVocabularyRulesCatchViolations: both are fed violations and must find them.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// hostPackages are what the engine must never reach: the host's meters and ledger, a binding
// call's walk, the upstream client, and what wires them to it.
var hostPackages = []string{"budget", "binding", "upstream", "execution", "mcpserver"}

// hostWords are the host's concerns, which no name the engine declares may mention.
var hostWords = regexp.MustCompile(`(?i)budget|approval|upstream`)

func underEngine(rel string) bool { return rel == "engine" || strings.HasPrefix(rel, "engine/") }

// engineSide are the packages that run programs and speak the engine's frames: the engine,
// and the remote client and sandbox service, which carry them between machines.
func engineSide(rel string) bool {
	return underEngine(rel) || rel == "remote" || strings.HasPrefix(rel, "remote/")
}

// hostDeps are the host packages among deps (import paths) of a package under engine/.
func hostDeps(deps []string) []string {
	var out []string
	for _, d := range deps {
		for _, h := range hostPackages {
			if d == module+"/"+h || strings.HasPrefix(d, module+"/"+h+"/") {
				out = append(out, d)
			}
		}
	}
	return out
}

// hostNames are the declared names and JSON keys of f that speak of the host's concerns.
func hostNames(f *ast.File) []string {
	var out []string
	check := func(name string) {
		if hostWords.MatchString(name) {
			out = append(out, name)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSpec:
			check(n.Name.Name)
		case *ast.FuncDecl:
			check(n.Name.Name)
		case *ast.ValueSpec:
			for _, id := range n.Names {
				check(id.Name)
			}
		case *ast.Field:
			for _, id := range n.Names {
				check(id.Name)
			}
			if n.Tag != nil {
				if tag, err := strconv.Unquote(n.Tag.Value); err == nil {
					check(reflect.StructTag(tag).Get("json"))
				}
			}
		}
		return true
	})
	return out
}

func TestEngineKnowsNoHost(t *testing.T) {
	for _, goos := range platforms {
		cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./engine/...", "./remote/...")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (GOOS=%s): %v", goos, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if bad := hostDeps(f[1:]); len(bad) > 0 {
				t.Errorf("GOOS=%s: %s depends on %v: the engine says what the sandbox saw, and the host adds the rest (execution.Result)", goos, f[0], bad)
			}
		}
	}
	files := goFiles(t, func(name string) bool { return engineSide(path.Dir(name)) && !strings.HasSuffix(name, "_test.go") })
	for name, f := range files {
		for _, n := range hostNames(f) {
			t.Errorf("%s declares %q: budgets, approvals and upstream servers are the host's (execution, binding, upstream), not the engine's", name, n)
		}
	}
}

// retired are types that issue 22 folded into one, by package, with where their job went: a
// second copy must not grow back.
var retired = map[string]map[string]string{
	"engine": {
		"Result": "execution.Result (the engine's part is Outcome)", "Usage": "budget.Usage", "ContextUsage": "budget.Context",
		"ContextReport": "execution.Context", "BudgetReport": "execution.Budget", "ApprovalCounts": "binding.ApprovalCounts",
		"UpstreamProblem": "execution.UpstreamProblem",
	},
	"outputs":  {"Reply": "wire.Answer", "HandleRef": "wire.Handle"},
	"upstream": {"Answer": "wire.Answer (with upstream.Spent)"},
	"remote":   {"Reply": "wire.Result", "Handle": "wire.Handle", "Call": "wire.Call", "Read": "wire.Read"},
}

// frameViolations are the struct types of a file in package rel that copy a type of
// engine/wire (wireNames) or bring back a retired one.
func frameViolations(rel string, f *ast.File, wireNames []string) []string {
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok {
				continue
			}
			if where, ok := retired[rel][ts.Name.Name]; ok {
				out = append(out, fmt.Sprintf("%s.%s is retired: it is %s", rel, ts.Name.Name, where))
				continue
			}
			if _, isStruct := ts.Type.(*ast.StructType); isStruct && engineSide(rel) && rel != "engine/wire" && slices.Contains(wireNames, ts.Name.Name) {
				out = append(out, fmt.Sprintf("%s.%s copies wire.%s: a frame has one definition, in engine/wire", rel, ts.Name.Name, ts.Name.Name))
			}
		}
	}
	return out
}

// wireTypes are the struct types engine/wire declares in frames.go.
func wireTypes(t *testing.T) []string {
	f := goFiles(t, func(name string) bool { return name == "engine/wire/frames.go" })["engine/wire/frames.go"]
	if f == nil {
		t.Fatal("engine/wire/frames.go is not tracked")
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if _, ok := ts.Type.(*ast.StructType); ok {
				names = append(names, ts.Name.Name)
			}
		}
		return true
	})
	return names
}

func TestOneDefinitionOfEachFrame(t *testing.T) {
	wireNames := wireTypes(t)
	for _, want := range []string{"Call", "Read", "Result", "Answer", "Handle"} {
		if !slices.Contains(wireNames, want) {
			t.Fatalf("engine/wire declares no %s: the rule below would guard nothing", want)
		}
	}
	files := goFiles(t, func(name string) bool { return !strings.HasSuffix(name, "_test.go") && !exempt(path.Dir(name)) })
	for name, f := range files {
		for _, v := range frameViolations(path.Dir(name), f, wireNames) {
			t.Errorf("%s: %s", name, v)
		}
	}
}

func TestVocabularyRulesCatchViolations(t *testing.T) {
	if got := hostDeps([]string{"context", module + "/engine/wire", module + "/failure"}); len(got) != 0 {
		t.Errorf("hostDeps found %v in clean deps", got)
	}
	if got := hostDeps([]string{module + "/budget", module + "/budget/sqlite", module + "/upstream", module + "/outputs"}); len(got) != 3 {
		t.Errorf("hostDeps found %v, want budget, budget/sqlite and upstream", got)
	}
	if got := hostNames(parseSrc(t, "type Outcome struct { Value int `json:\"value\"`; Spent int `json:\"budget\"` }\nfunc ApprovalOf() {}\nvar upstreamName string")); len(got) != 3 {
		t.Errorf("hostNames found %v, want the budget key, ApprovalOf and upstreamName", got)
	}
	if got := hostNames(parseSrc(t, "type Outcome struct { Value int `json:\"value\"` }")); len(got) != 0 {
		t.Errorf("hostNames found %v in clean source", got)
	}
	wire := []string{"Call", "Handle"}
	src := parseSrc(t, "type Call struct{}\ntype Handle string\ntype Reply struct{}\ntype Accepted struct{}")
	if got := frameViolations("remote", src, wire); len(got) != 3 { // Call copied, Handle and Reply retired
		t.Errorf("frameViolations(remote) = %q, want 3", got)
	}
	if got := frameViolations("engine/backend/process", parseSrc(t, "type Handle struct{}\ntype Call func()"), wire); len(got) != 1 {
		t.Errorf("frameViolations(process) = %q, want the Handle struct", got)
	}
	if got := frameViolations("execution", parseSrc(t, "type Result struct{}\ntype Call struct{}"), wire); len(got) != 0 {
		t.Errorf("frameViolations(execution) = %q: the frame rule binds engine/ and remote/ only", got)
	}
	if got := frameViolations("remote/service", parseSrc(t, "type Call struct{}"), wire); len(got) != 1 {
		t.Errorf("frameViolations(remote/service) = %q, want Call copied", got)
	}
	if got := frameViolations("engine", parseSrc(t, "type Usage struct{}"), wire); len(got) != 1 {
		t.Errorf("frameViolations(engine) = %q, want engine.Usage retired", got)
	}
}

func parseSrc(t *testing.T, src string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package x\n"+src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
