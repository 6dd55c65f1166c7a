package seatbelt

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/default.sb from Profile")

const home = "/Users/alice"

// defaultPolicy is the policy for default terms (network none) on a Mac with the python.org
// interpreter, a workspace in the user's temporary directory, and its temporary directory
// beside it, as seatbelt_darwin.go lays them out.
var defaultPolicy = Policy{
	Python:    "/Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12",
	ReadOnly:  []string{"/Library/Frameworks/Python.framework/Versions/3.12", "/Library/Frameworks/Python.framework/Versions/3.12/lib/python3.12"},
	Workspace: "/private/var/folders/xy/abc123/T/mcp-sandbox-workspaces/mcp-sandbox-ws-1234-5678",
	Temp:      "/private/var/folders/xy/abc123/T/mcp-sandbox-workspaces/mcp-sandbox-ws-1234-5678.tmp",
}

// TestGolden pins the profile for default terms: testdata/default.sb is what a Mac gets,
// and the rule checks below read that file, not a fresh rendering. -update rewrites it.
func TestGolden(t *testing.T) {
	got := Profile(defaultPolicy)
	file := filepath.Join("testdata", "default.sb")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Profile(default terms) differs from %s (-want +got; go test -update rewrites it):\n%s", file, diff)
	}
}

// TestDefaultProfileRules parses the golden profile and checks each of its promises by
// evaluating requests against it, and by inspecting every rule that allows something.
func TestDefaultProfileRules(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "default.sb"))
	if err != nil {
		t.Fatal(err)
	}
	pr := parseProfile(t, string(text))
	ws, tmp := defaultPolicy.Workspace, defaultPolicy.Temp

	t.Run("deny default", func(t *testing.T) {
		if !pr.denyDefault {
			t.Fatal("the profile does not start from (deny default)")
		}
	})
	t.Run("network denied", func(t *testing.T) {
		for _, op := range []string{"network-outbound", "network-inbound", "network-bind", "system-socket"} {
			for _, r := range pr.allows {
				if r.covers(op) {
					t.Errorf("%s is allowed by %s", op, r.text)
				}
			}
		}
	})
	t.Run("writes only in the workspace and its temporary directory", func(t *testing.T) {
		for _, r := range pr.allows {
			if !r.coversAny("file-write-data", "file-write-create", "file-write-unlink", "file-write-mode") {
				continue
			}
			for _, f := range r.filters {
				ok := f.kind == "subpath" && (f.arg == ws || f.arg == tmp) || f.kind == "literal" && f.arg == "/dev/null"
				if !ok {
					t.Errorf("a write is allowed at %s by %s", f, r.text)
				}
			}
		}
		for _, c := range []struct {
			path string
			want bool
		}{
			{ws + "/out.csv", true}, {tmp + "/tmpab12", true}, {ws, true},
			{ws + "-other/x", false}, // a sibling workspace sharing the prefix
			{filepath.Dir(ws) + "/x", false}, {"/private/tmp/x", false}, {home + "/notes.txt", false},
			{home + "/Library/LaunchAgents/evil.plist", false}, {"/private/etc/hosts", false},
			{defaultPolicy.ReadOnly[0] + "/lib/python3.12/site.py", false}, {"/dev/zero", false},
		} {
			if got := pr.allowed("file-write-create", c.path); got != c.want {
				t.Errorf("file-write-create %s: allowed = %v, want %v", c.path, got, c.want)
			}
		}
	})
	t.Run("the home is unreadable but for the read-only paths", func(t *testing.T) {
		for _, r := range pr.allows {
			if !r.coversAny("file-read-data", "file-read-xattr") {
				continue
			}
			for _, f := range r.filters {
				if within(f.arg, home) || within(home, f.arg) {
					t.Errorf("reading %s is allowed by %s", f, r.text)
				}
			}
		}
		for _, p := range []string{home, home + "/.ssh/id_ed25519", home + "/Documents/taxes.pdf", "/Users", "/Users/bob/.zsh_history"} {
			for _, op := range []string{"file-read-data", "file-read-metadata"} {
				if pr.allowed(op, p) {
					t.Errorf("%s %s is allowed", op, p)
				}
			}
		}
		for _, p := range []string{defaultPolicy.Python, defaultPolicy.ReadOnly[0] + "/lib/python3.12/os.py", ws + "/in.txt", "/usr/lib/libSystem.B.dylib"} {
			if !pr.allowed("file-read-data", p) {
				t.Errorf("file-read-data %s is denied; the interpreter cannot start", p)
			}
		}
	})
	t.Run("no process but its own", func(t *testing.T) {
		for _, r := range pr.allows {
			if r.coversAny("process-info-pidinfo", "process-info-listpids") {
				if want := []filter{{"target", "self"}}; !cmp.Equal(r.filters, want, cmp.AllowUnexported(filter{})) {
					t.Errorf("process information is allowed by %s, want only (target self)", r.text)
				}
			}
			if r.covers("signal") {
				if want := []filter{{"target", "same-sandbox"}}; !cmp.Equal(r.filters, want, cmp.AllowUnexported(filter{})) {
					t.Errorf("signals are allowed by %s, want only (target same-sandbox)", r.text)
				}
			}
			if r.covers("sysctl-read") && slices.ContainsFunc(r.filters, func(f filter) bool { return strings.HasPrefix(f.arg, "kern.proc") }) {
				t.Errorf("the process table is readable through %s", r.text)
			}
		}
		if !pr.allowed("process-exec", defaultPolicy.Python) || pr.allowed("process-exec", home+"/bin/tool") {
			t.Error("exec must be allowed for the interpreter and refused in the home")
		}
	})
}

// TestNetworkGranted: the one difference a network grant makes is the network rules.
func TestNetworkGranted(t *testing.T) {
	p := defaultPolicy
	p.Network = true
	pr := parseProfile(t, Profile(p))
	if !pr.allowed("network-outbound", "") {
		t.Error("network granted, but network-outbound is denied")
	}
}

// TestHomeInterpreter: an interpreter installed in the home (pyenv) is readable, and only it.
func TestHomeInterpreter(t *testing.T) {
	p := defaultPolicy
	p.Python = home + "/.pyenv/versions/3.12.7/bin/python3.12"
	p.ReadOnly = []string{home + "/.pyenv/versions/3.12.7"}
	pr := parseProfile(t, Profile(p))
	for c, want := range map[string]bool{
		home + "/.pyenv/versions/3.12.7/lib/python3.12/os.py": true,
		home + "/.pyenv/versions/3.11.9/lib/python3.11/os.py": false,
		home + "/.ssh/id_ed25519":                             false,
		home + "/.pyenv/version":                              false,
	} {
		if got := pr.allowed("file-read-data", c); got != want {
			t.Errorf("file-read-data %s: allowed = %v, want %v", c, got, want)
		}
	}
	if !pr.allowed("file-read-metadata", home+"/.pyenv") || pr.allowed("file-read-data", home+"/.pyenv") {
		t.Error("a directory above the interpreter must be open to a lookup (metadata) and closed to a listing")
	}
}

func TestArgs(t *testing.T) {
	got, err := Args(defaultPolicy, []string{"-I", "-c", "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{SandboxExec, "-p", Profile(defaultPolicy), defaultPolicy.Python, "-I", "-c", "print(1)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	for name, p := range map[string]Policy{
		"relative interpreter": {Python: "python3", Workspace: "/w", Temp: "/t"},
		"option interpreter":   {Python: "-f", Workspace: "/w", Temp: "/t"},
		"no workspace":         {Python: "/usr/bin/python3", Temp: "/t"},
		"newline in a path":    {Python: "/usr/bin/python3", Workspace: "/w\n(allow default)", Temp: "/t"},
	} {
		if _, err := Args(p, nil); err == nil {
			t.Errorf("%s: Args accepted %+v", name, p)
		}
	}
}

func TestQuote(t *testing.T) {
	pr := parseProfile(t, "(version 1)\n(deny default)\n(allow file-read* (literal "+quote(`/a "b" \c`)+"))\n")
	if !pr.allowed("file-read-data", `/a "b" \c`) {
		t.Error("a quoted path did not read back as itself")
	}
}

// A small reader for the profile: S-expressions of lists, symbols, strings and comments;
// enough of SBPL to evaluate the rules Profile writes, and strict about anything else.

type sexp struct {
	atom   string // a symbol, or a string's contents when str
	str    bool
	list   []sexp
	isList bool
}

func readSexps(src string) ([]sexp, error) {
	var stack [][]sexp
	var top []sexp
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\n' || c == '\t':
			i++
		case c == '(':
			stack = append(stack, top)
			top = nil
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced ) at %d", i)
			}
			l := sexp{list: top, isList: true}
			top = append(stack[len(stack)-1], l)
			stack = stack[:len(stack)-1]
			i++
		case c == '"':
			var b strings.Builder
			i++
			for ; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' && i+1 < len(src) {
					i++
				}
				b.WriteByte(src[i])
			}
			if i == len(src) {
				return nil, fmt.Errorf("unterminated string")
			}
			i++
			top = append(top, sexp{atom: b.String(), str: true})
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \n\t()\";", rune(src[j])) {
				j++
			}
			top = append(top, sexp{atom: src[i:j]})
			i = j
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("unbalanced (")
	}
	return top, nil
}

type filter struct{ kind, arg string }

func (f filter) String() string { return "(" + f.kind + " " + f.arg + ")" }

type rule struct {
	ops     []string
	filters []filter // any one matching is enough; none means every object
	text    string
}

// covers reports whether one of the rule's operations names op: exactly, or as a family
// ending in '*'.
func (r rule) covers(op string) bool {
	for _, o := range r.ops {
		if o == op || strings.HasSuffix(o, "*") && strings.HasPrefix(op, strings.TrimSuffix(o, "*")) {
			return true
		}
	}
	return false
}

func (r rule) coversAny(ops ...string) bool { return slices.ContainsFunc(ops, r.covers) }

type profile struct {
	denyDefault bool
	allows      []rule
}

var knownFilters = []string{"subpath", "literal", "target", "sysctl-name", "sysctl-name-prefix", "global-name"}

func parseProfile(t *testing.T, text string) profile {
	t.Helper()
	exprs, err := readSexps(text)
	if err != nil {
		t.Fatal(err)
	}
	var pr profile
	for _, e := range exprs {
		if !e.isList || len(e.list) == 0 || e.list[0].isList {
			t.Fatalf("not a rule: %+v", e)
		}
		head := e.list[0].atom
		switch head {
		case "version":
			continue
		case "deny":
			if len(e.list) == 2 && e.list[1].atom == "default" {
				pr.denyDefault = true
				continue
			}
			t.Fatalf("a deny rule this reader does not evaluate: %+v", e)
		case "allow":
		default:
			t.Fatalf("unknown form %q", head)
		}
		r := rule{text: render(e)}
		for _, x := range e.list[1:] {
			switch {
			case !x.isList && !x.str:
				r.ops = append(r.ops, x.atom)
			case x.isList && len(x.list) == 2 && slices.Contains(knownFilters, x.list[0].atom):
				r.filters = append(r.filters, filter{x.list[0].atom, x.list[1].atom})
			default:
				t.Fatalf("a filter this reader does not evaluate in %s", r.text)
			}
		}
		pr.allows = append(pr.allows, r)
	}
	return pr
}

func render(e sexp) string {
	if !e.isList {
		if e.str {
			return fmt.Sprintf("%q", e.atom)
		}
		return e.atom
	}
	parts := make([]string, len(e.list))
	for i, x := range e.list {
		parts[i] = render(x)
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// allowed evaluates op on path: some allow rule names op and has no filter, or a path
// filter that matches.
func (pr profile) allowed(op, path string) bool {
	if !pr.denyDefault {
		return true
	}
	for _, r := range pr.allows {
		if !r.covers(op) {
			continue
		}
		if len(r.filters) == 0 {
			return true
		}
		for _, f := range r.filters {
			switch f.kind {
			case "subpath":
				if within(path, f.arg) {
					return true
				}
			case "literal":
				if path == f.arg {
					return true
				}
			}
		}
	}
	return false
}
