package mcpsandbox_test

// The rules of one vocabulary (issue 22): the engine says what the sandbox saw and nothing of
// the host's concerns, and each frame, a call's answer and a handle have one definition.
//
//   - TestEngineKnowsNoHost: no package under engine/ depends, even indirectly, on budget,
//     binding, upstream, execution or mcpserver, and none declares a name (or a JSON key) of
//     budgets, approvals or upstream servers.
//   - TestUpstreamKnowsNoEngine (issue 40): no package under upstream/, nor toolshape, depends,
//     even indirectly, on a package under engine/: a call's answer is toolcall's, the leaf
//     both sides use.
//   - TestOneDefinitionOfEachFrame: no package under engine/ declares a struct named like one
//     of engine/wire's frames (frames.go) or toolcall's Answer and Handle, but their own
//     package, and the types retired by those moves stay retired.
//   - TestVocabularyRulesCatchViolations: each is fed violations and must find them.

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
		cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./engine/...")
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
	files := goFiles(t, func(name string) bool { return underEngine(path.Dir(name)) && !strings.HasSuffix(name, "_test.go") })
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
	"outputs":               {"Reply": "toolcall.Answer", "HandleRef": "toolcall.Handle"},
	"upstream":              {"Answer": "toolcall.Answer (with upstream.Spent)"},
	"engine/backend/remote": {"Reply": "wire.Result", "Handle": "toolcall.Handle", "Call": "wire.Call", "Read": "wire.Read"},
	"engine/wire":           {"Answer": "toolcall.Answer (issue 40: the leaf upstream uses too)", "Handle": "toolcall.Handle"},
}

// frameViolations are the struct types of a file in package rel that copy a shared type (the
// name, and the package that defines it: engine/wire's frames, toolcall's answer and handle)
// or bring back a retired one.
func frameViolations(rel string, f *ast.File, shared map[string]string) []string {
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
			home, isShared := shared[ts.Name.Name]
			if _, isStruct := ts.Type.(*ast.StructType); isStruct && isShared && underEngine(rel) && rel != home {
				out = append(out, fmt.Sprintf("%s.%s copies %s.%s: it has one definition, in %s", rel, ts.Name.Name, path.Base(home), ts.Name.Name, home))
			}
		}
	}
	return out
}

// sharedTypes maps each struct type of engine/wire's frames.go and of toolcall's answer.go to
// the package that defines it.
func sharedTypes(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, file := range []string{"engine/wire/frames.go", "toolcall/answer.go"} {
		f := goFiles(t, func(name string) bool { return name == file })[file]
		if f == nil {
			t.Fatalf("%s is not tracked", file)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if _, ok := ts.Type.(*ast.StructType); ok {
					out[ts.Name.Name] = path.Dir(file)
				}
			}
			return true
		})
	}
	return out
}

func TestOneDefinitionOfEachFrame(t *testing.T) {
	shared := sharedTypes(t)
	for name, home := range map[string]string{"Call": "engine/wire", "Read": "engine/wire", "Result": "engine/wire", "Answer": "toolcall", "Handle": "toolcall"} {
		if shared[name] != home {
			t.Fatalf("%s declares no %s: the rule below would guard nothing", home, name)
		}
	}
	files := goFiles(t, func(name string) bool { return !strings.HasSuffix(name, "_test.go") && !exempt(path.Dir(name)) })
	for name, f := range files {
		for _, v := range frameViolations(path.Dir(name), f, shared) {
			t.Errorf("%s: %s", name, v)
		}
	}
}

// upstreamSide reports whether package rel is the upstream client's: upstream, its
// subpackages, and the tool shape it reads its tools by.
func upstreamSide(rel string) bool {
	return rel == "upstream" || strings.HasPrefix(rel, "upstream/") || rel == "toolshape"
}

// engineDeps are the packages under engine/ among deps (import paths).
func engineDeps(deps []string) []string {
	var out []string
	for _, d := range deps {
		if rel, ok := strings.CutPrefix(d, module+"/"); ok && underEngine(rel) {
			out = append(out, d)
		}
	}
	return out
}

func TestUpstreamKnowsNoEngine(t *testing.T) {
	for _, goos := range platforms {
		for _, p := range listDeps(t, goos) {
			if upstreamSide(strings.TrimPrefix(strings.TrimPrefix(p[0], module), "/")) {
				if bad := engineDeps(p[1:]); len(bad) > 0 {
					t.Errorf("GOOS=%s: %s depends on %v: upstream and the engine share a call's answer through toolcall, and neither imports the other", goos, p[0], bad)
				}
			}
		}
	}
}

// listDeps is each package of the module with its dependencies, for goos: [path, deps...].
func listDeps(t *testing.T, goos string) [][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list (GOOS=%s): %v", goos, err)
	}
	var pkgs [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkgs = append(pkgs, strings.Fields(line))
	}
	return pkgs
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
	wire := map[string]string{"Call": "engine/wire", "Handle": "toolcall", "Answer": "toolcall"}
	src := parseSrc(t, "type Call struct{}\ntype Handle string\ntype Reply struct{}\ntype Accepted struct{}")
	if got := frameViolations("engine/backend/remote", src, wire); len(got) != 3 { // Call copied, Handle and Reply retired
		t.Errorf("frameViolations(remote) = %q, want 3", got)
	}
	if got := frameViolations("engine/backend/process", parseSrc(t, "type Handle struct{}\ntype Call func()"), wire); len(got) != 1 {
		t.Errorf("frameViolations(process) = %q, want the Handle struct", got)
	}
	if got := frameViolations("execution", parseSrc(t, "type Result struct{}\ntype Call struct{}"), wire); len(got) != 0 {
		t.Errorf("frameViolations(execution) = %q: the frame rule binds engine/ only", got)
	}
	if got := frameViolations("engine", parseSrc(t, "type Usage struct{}"), wire); len(got) != 1 {
		t.Errorf("frameViolations(engine) = %q, want engine.Usage retired", got)
	}
	if got := frameViolations("engine/wire", parseSrc(t, "type Answer struct{}\ntype Call struct{}"), wire); len(got) != 1 {
		t.Errorf("frameViolations(engine/wire) = %q, want Answer retired (it is toolcall's) and Call at home", got)
	}
	if got := frameViolations("engine", parseSrc(t, "type Answer struct{}"), wire); len(got) != 1 {
		t.Errorf("frameViolations(engine) = %q, want the copy of toolcall.Answer", got)
	}
	if got := frameViolations("toolcall", parseSrc(t, "type Answer struct{}\ntype Handle struct{}"), wire); len(got) != 0 {
		t.Errorf("frameViolations(toolcall) = %q: toolcall is the Answer's home", got)
	}
	if got := engineDeps([]string{"context", module + "/toolcall", module + "/failure", module + "/engineer"}); len(got) != 0 {
		t.Errorf("engineDeps found %v in clean deps", got)
	}
	if got := engineDeps([]string{module + "/engine", module + "/engine/wire", module + "/toolcall"}); len(got) != 2 {
		t.Errorf("engineDeps found %v, want engine and engine/wire", got)
	}
	if !upstreamSide("upstream") || !upstreamSide("upstream/oauthclient") || !upstreamSide("toolshape") || upstreamSide("binding") || upstreamSide("upstreams") {
		t.Errorf("upstreamSide names the wrong packages")
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
