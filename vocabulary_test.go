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
//   - TestOneStorageContract (issue 40): a ledger is one contract, required whole
//     (budget.Ledger): nothing asserts a ledger to one of its parts or to an anonymous
//     interface of its methods to ask what it can do.
//   - TestPauseRowsAreApprovals (issue 40): a question's pause is its one state, kept by
//     package approval: outside budget (its store) and approval, only cmd (the retention
//     sweeper, which opens the store) calls a budget.Pauses method; mcpserver keeps no
//     bookkeeping of its own beside it.
//   - TestOneEditDistance (issue 40): the edit distance behind every "did you mean" is
//     internal/nearest's; no other package declares one.
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
	"slices"
	"strconv"
	"strings"
	"testing"
)

// hostPackages are what the engine must never reach: the host's meters and ledger, a binding
// call's walk, the upstream client, and what wires them to it.
var hostPackages = []string{"budget", "binding", "approval", "upstream", "execution", "mcpserver"}

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

// retired are types that issues 22 and 40 folded into one, by package, with where their job
// went: a second copy must not grow back.
var retired = map[string]map[string]string{
	"engine": {
		"Result": "execution.Result (the engine's part is Outcome)", "Usage": "budget.Usage", "ContextUsage": "telemetry.Context",
		"ContextReport": "execution.Context", "BudgetReport": "execution.Budget", "ApprovalCounts": "approval.Counts",
		"UpstreamProblem": "execution.UpstreamProblem", "Attachment": "outputs.Attachment",
	},
	"outputs":               {"Reply": "toolcall.Answer", "HandleRef": "toolcall.Handle"},
	"upstream":              {"Answer": "toolcall.Answer (with upstream.Spent)"},
	"engine/backend/remote": {"Reply": "wire.Result", "Handle": "toolcall.Handle", "Call": "wire.Call", "Read": "wire.Read"},
	"engine/wire":           {"Answer": "toolcall.Answer (issue 40: the leaf upstream uses too)", "Handle": "toolcall.Handle"},
	// Issue 40's twins: one type each.
	"budget": {"Context": "telemetry.Context, the one type of the context economy (the ledger keeps it, metrics count it)",
		"Network": "egress.Stats.Record, JSON the ledger holds as it is", "NetworkRefusal": "egress.RefusalCount",
		"Outcome": "budget.CallFinish, the record a Ticket finishes with (engine.Outcome is what a sandbox saw)"},
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
	methods := []string{"SavePause", "Flush"}
	src = parseSrc(t, "func f(l any) { _ = l.(budget.Pauses); _, _ = l.(interface{ Flush(context.Context) error }); _ = l.(interface{ CloseWrite() error }); _ = l.(*sqlite.Ledger) }")
	if got := ledgerAssertions(src, methods); len(got) != 2 {
		t.Errorf("ledgerAssertions = %q, want budget.Pauses and the Flush interface", got)
	}
	src = parseSrc(t, "func f(h *handlers) { h.pauses.DecidePause(ctx, id, s, by); h.room.Answer(ctx, id, a) }")
	if got := pauseCalls("mcpserver", src, []string{"DecidePause", "Pause"}); len(got) != 1 {
		t.Errorf("pauseCalls(mcpserver) = %q, want DecidePause", got)
	}
	if got := pauseCalls("approval", src, []string{"DecidePause"}); len(got) != 0 {
		t.Errorf("pauseCalls(approval) = %q: the room may", got)
	}
	src = parseSrc(t, "func editDistance(a, b string) int { return 0 }\nfunc Nearest() {}\nfunc nearestFree() {}")
	if got := distanceViolations("configs", src); len(got) != 2 {
		t.Errorf("distanceViolations(configs) = %q, want editDistance and Nearest", got)
	}
	if got := distanceViolations("internal/nearest", src); len(got) != 0 {
		t.Errorf("distanceViolations(internal/nearest) = %q: its home may", got)
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

// ledgerMethods are the methods of budget.Ledger, its parts' included, as budget declares
// them, but Close (which many things have).
func ledgerMethods(t *testing.T) []string {
	t.Helper()
	files := goFiles(t, func(name string) bool { return path.Dir(name) == "budget" && !strings.HasSuffix(name, "_test.go") })
	ifaces := map[string]*ast.InterfaceType{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if it, ok := ts.Type.(*ast.InterfaceType); ok {
					ifaces[ts.Name.Name] = it
				}
			}
			return true
		})
	}
	var out []string
	var walk func(name string)
	walk = func(name string) {
		it := ifaces[name]
		if it == nil {
			t.Fatalf("budget declares no interface %s", name)
		}
		for _, m := range it.Methods.List {
			switch {
			case len(m.Names) == 0: // an embedded part
				if id, ok := m.Type.(*ast.Ident); ok {
					walk(id.Name)
				}
			case m.Names[0].Name != "Close":
				out = append(out, m.Names[0].Name)
			}
		}
	}
	walk("Ledger")
	return out
}

// ledgerAssertions are the type assertions of f that ask a ledger what it can do: to a type of
// package budget, or to an anonymous interface with a method of the Ledger's (methods).
func ledgerAssertions(f *ast.File, methods []string) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		ta, ok := n.(*ast.TypeAssertExpr)
		if !ok || ta.Type == nil {
			return true
		}
		switch ty := ta.Type.(type) {
		case *ast.SelectorExpr:
			if id, ok := ty.X.(*ast.Ident); ok && id.Name == "budget" {
				out = append(out, "an assertion to budget."+ty.Sel.Name)
			}
		case *ast.InterfaceType:
			for _, m := range ty.Methods.List {
				for _, name := range m.Names {
					if slices.Contains(methods, name.Name) {
						out = append(out, "an assertion to an interface of the ledger's method "+name.Name)
					}
				}
			}
		}
		return true
	})
	return out
}

func TestOneStorageContract(t *testing.T) {
	methods := ledgerMethods(t)
	for _, want := range []string{"StartCall", "SavePause", "PutCassette", "MergeObservedShape", "Execution", "Flush", "FinishCallLater", "LeaseHeldUntil"} {
		if !slices.Contains(methods, want) {
			t.Fatalf("budget.Ledger has no method %s: the one contract is not whole (%v)", want, methods)
		}
	}
	for name, f := range goFiles(t, func(string) bool { return true }) {
		for _, v := range ledgerAssertions(f, methods) {
			t.Errorf("%s: %s: a ledger is one contract, required whole (budget.Ledger); call the method", name, v)
		}
	}
}

// distanceNames are the names a second edit distance (or its "nearest" wrapper) would take.
var distanceNames = regexp.MustCompile(`(?i)^(edit_?distance|levenshtein|nearest)$`)

// distanceViolations are the functions of f, in package rel, that copy internal/nearest's job.
func distanceViolations(rel string, f *ast.File) []string {
	if rel == "internal/nearest" {
		return nil
	}
	var out []string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && distanceNames.MatchString(fd.Name.Name) {
			out = append(out, fmt.Sprintf("%s.%s: the edit distance is internal/nearest's (nearest.Name)", rel, fd.Name.Name))
		}
	}
	return out
}

func TestOneEditDistance(t *testing.T) {
	for name, f := range goFiles(t, func(name string) bool { return !strings.HasSuffix(name, "_test.go") }) {
		for _, v := range distanceViolations(path.Dir(name), f) {
			t.Errorf("%s: %s", name, v)
		}
	}
}

// pausesMethods are budget.Pauses's methods, as budget declares them.
func pausesMethods(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range goFiles(t, func(name string) bool { return name == "budget/pause.go" }) {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Pauses" {
				for _, m := range ts.Type.(*ast.InterfaceType).Methods.List {
					for _, id := range m.Names {
						out = append(out, id.Name)
					}
				}
			}
			return true
		})
	}
	return out
}

// pauseCalls are the calls in f, of package rel, of a pause store's methods (methods) where
// only budget and approval may make them.
func pauseCalls(rel string, f *ast.File, methods []string) []string {
	if rel == "approval" || rel == "budget" || strings.HasPrefix(rel, "budget/") || exempt(rel) {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && slices.Contains(methods, sel.Sel.Name) {
				out = append(out, fmt.Sprintf("%s calls %s: a question's pause is package approval's (its Room)", rel, sel.Sel.Name))
			}
		}
		return true
	})
	return out
}

func TestPauseRowsAreApprovals(t *testing.T) {
	methods := pausesMethods(t)
	for _, want := range []string{"SavePause", "DecidePause", "ClaimPause", "SetPauseResult"} {
		if !slices.Contains(methods, want) {
			t.Fatalf("budget.Pauses has no %s (%v): the rule would guard nothing", want, methods)
		}
	}
	for name, f := range goFiles(t, func(name string) bool { return !strings.HasSuffix(name, "_test.go") }) {
		for _, v := range pauseCalls(path.Dir(name), f, methods) {
			t.Errorf("%s: %s", name, v)
		}
	}
}
