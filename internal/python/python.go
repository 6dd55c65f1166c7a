package python

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Candidates are tried in order after a configured interpreter.
var Candidates = []string{"/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"}

// Find returns the absolute path of an interpreter that uid/gid can execute (a symbolic link
// is kept as it is, so a virtual environment stays one):
// configured when it is set (an error if that one is not usable), otherwise the first usable
// of lookPath("python3") and Candidates.
func Find(configured string, uid, gid int, lookPath func(string) (string, error)) (string, error) {
	if configured != "" {
		p, err := usable(configured, uid, gid)
		if err != nil {
			return "", fmt.Errorf("python %q: %w", configured, err)
		}
		return p, nil
	}
	var tried []string
	cands := append([]string(nil), Candidates...)
	if lookPath != nil {
		if p, err := lookPath("python3"); err == nil {
			cands = append([]string{p}, cands...)
		}
	}
	for _, c := range cands {
		p, err := usable(c, uid, gid)
		if err == nil {
			return p, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", c, err))
	}
	return "", fmt.Errorf("no python3 that uid %d can execute: tried %s; install python3 (apt-get install python3) or set python: in the profile", uid, strings.Join(tried, ", "))
}

// usable returns the absolute path to execute: the path as given, not the binary it links
// to, because a virtual environment is the interpreter started through its own bin/python3
// (the symlink next to pyvenv.cfg), and the same binary started as itself is the base
// interpreter without the environment's packages. Both the path and the binary must be
// reachable by uid/gid, and the binary must be a real interpreter.
func usable(path string, uid, gid int) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	if err := Reachable(abs, uid, gid, 1); err != nil {
		return "", err
	}
	if err := Reachable(real, uid, gid, 1); err != nil {
		return "", err
	}
	// A wrapper script (a pyenv shim, say) depends on an environment the sandbox does not
	// pass on, and execs something else: only a real interpreter binary will do.
	f, err := os.Open(real)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); runtime.GOOS == "linux" && (err != nil || string(magic[:]) != "\x7fELF") {
		return "", fmt.Errorf("%s is a wrapper script, not an interpreter binary", real)
	}
	return abs, nil
}

// Reachable checks that uid/gid may search every directory above path and has the access
// bit want (1 execute, 4 read) on path itself. Root passes any directory check, as the kernel
// does, but still needs an execute bit on a file.
func Reachable(path string, uid, gid int, want uint32) error {
	dir := filepath.Dir(path)
	for {
		if err := access(dir, uid, gid, 1); err != nil {
			return fmt.Errorf("%s is not searchable by uid %d", dir, uid)
		}
		if dir == "/" {
			break
		}
		dir = filepath.Dir(dir)
	}
	if err := access(path, uid, gid, want); err != nil {
		return fmt.Errorf("not executable by uid %d", uid)
	}
	return nil
}

// Info is what an interpreter says about itself: the directories it reads at run time (its
// prefixes and the entries of its default sys.path; for a virtual environment that is the
// environment's prefix and site-packages and its base interpreter's standard library, so every
// backend binds or allows both), and, when a source was given and it
// compiles, that source compiled by this interpreter (marshal, base64), which Argv hands to
// the interpreter instead of the text: compiling the bootstrap costs as much as starting the
// interpreter.
type Info struct {
	Dirs []string `json:"dirs"`
	Code string   `json:"code,omitempty"`
	// NoSite: the interpreter may start with -S, its site module not imported, because
	// Site lists, in order, every entry the site module added to its sys.path (its site
	// directories and what their .pth files name), which the code stub appends itself, and
	// Prefix and ExecPrefix are sys.prefix and sys.exec_prefix as site left them (a virtual
	// environment's own directory, which only site's venv step sets), which the stub sets.
	// Skipping site halves an interpreter's start (it reads every .pth file and runs their
	// import lines, sitecustomize too); a child loses only those import lines' side effects
	// (setuptools' distutils shim, say), never a directory.
	NoSite     bool     `json:"no_site,omitempty"`
	Site       []string `json:"site,omitempty"`
	Prefix     string   `json:"prefix,omitempty"`
	ExecPrefix string   `json:"exec_prefix,omitempty"`
}

// codeMarker separates the directories from the compiled source in the probe's answer;
// siteMarker, before it, the entries the site module added to sys.path.
const (
	codeMarker = "--mcp-sandbox-code--"
	siteMarker = "--mcp-sandbox-site--"
)

// probe prints the directories, then codeMarker and the source read from stdin, compiled
// with the name -c gives its code ("<string>") and marshalled, or nothing after the marker
// when it does not compile here.
// It starts without site (-S) and imports it itself, so it can tell what site added to
// sys.path; then siteMarker, sys.prefix and sys.exec_prefix as site left them, and those
// entries.
const probe = `import sys
base = list(sys.path)
import site
site.main()
for p in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *sys.path}:
    print(p)
if all("\n" not in p for p in [sys.prefix, sys.exec_prefix, *sys.path]):
    print("` + siteMarker + `")
    print(sys.prefix)
    print(sys.exec_prefix)
    for p in sys.path:
        if p not in base:
            print(p)
print("` + codeMarker + `")
src = sys.stdin.read()
if src:
    try:
        import marshal, binascii
        print(binascii.b2a_base64(marshal.dumps(compile(src, "<string>", "exec")), newline=False).decode())
    except Exception:
        pass
`

// Inspect asks the interpreter for its directories and compiles source with it ("" for none).
func Inspect(ctx context.Context, python, source string) (Info, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", probe)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(source)
	out, err := cmd.Output()
	if err != nil {
		return Info{}, fmt.Errorf("asking %s for its directories: %w", python, err)
	}
	dirsPart, code, _ := bytes.Cut(out, []byte(codeMarker+"\n"))
	dirsPart, sitePart, hasSite := bytes.Cut(dirsPart, []byte(siteMarker+"\n"))
	info := Info{Code: string(bytes.TrimSpace(code)), NoSite: hasSite}
	for _, l := range bytes.Split(dirsPart, []byte("\n")) {
		p := string(bytes.TrimSpace(l))
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			info.Dirs = append(info.Dirs, p)
		}
	}
	// Entries are kept as site left them (a missing directory too: sys.path keeps it), bar
	// blank lines; one that does not fit the stub's argument (a newline) was ruled out above.
	lines := strings.Split(string(sitePart), "\n")
	if len(lines) < 2 || lines[0] == "" || lines[1] == "" {
		info.NoSite = false
		return info, nil
	}
	info.Prefix, info.ExecPrefix = lines[0], lines[1]
	for _, p := range lines[2:] {
		if p != "" {
			info.Site = append(info.Site, p)
		}
	}
	return info, nil
}

// codeStub runs compiled code handed to it as its first argument, which it removes, so the
// code sees the arguments that follow as the source would have. Its first line is the
// bootstrap's own, which tests look for among running processes.
const codeStub = "# mcp-sandbox bootstrap (compiled)\nimport sys, marshal, binascii\nexec(marshal.loads(binascii.a2b_base64(sys.argv.pop(1))))"

// siteStub is codeStub for an interpreter started with -S: its second argument, removed too,
// holds, one a line, sys.prefix and sys.exec_prefix as site would leave them, which it sets,
// and the entries site would have added to sys.path, which it appends in order (so sys.path
// is the one site makes); and it gives the builtins site would have (exit, quit, help,
// copyright, credits, license). The .pth files' import lines and sitecustomize do not run.
var siteStub = "# mcp-sandbox bootstrap (compiled)\nimport sys, marshal, binascii\n" + sitePrelude(2) +
	"exec(marshal.loads(binascii.a2b_base64(sys.argv.pop(1))))"

// sitePrelude is Python, after an import of sys, that does what site would have done, from
// the argument at index arg of sys.argv, which it removes: siteStub's and SourceArgv's.
func sitePrelude(arg int) string {
	return "def _site(arg):\n" +
		"    import builtins, _sitebuiltins as s\n" +
		"    a = arg.split('\\n')\n" +
		"    sys.prefix, sys.exec_prefix = a[0], a[1]\n" +
		"    sys.path.extend(p for p in a[2:] if p and p not in sys.path)\n" +
		"    eof = 'Ctrl-D (i.e. EOF)'\n" +
		"    builtins.exit, builtins.quit, builtins.help = s.Quitter('exit', eof), s.Quitter('quit', eof), s._Helper()\n" +
		"    builtins.copyright = s._Printer('copyright', sys.copyright)\n" +
		"    builtins.credits = s._Printer('credits', 'Thanks to CWI, CNRI, BeOpen, Zope Corporation, the Python Software Foundation, and a cast of thousands for supporting Python development.  See www.python.org for more information.')\n" +
		"    builtins.license = s._Printer('license', 'See https://www.python.org/psf/license/')\n" +
		fmt.Sprintf("_site(sys.argv.pop(%d))\ndel _site\n", arg)
}

// siteArg is the argument siteStub and SourceArgv read site's work from, or "" when info
// does not say it.
func (info Info) siteArg() string {
	if !info.NoSite || info.Prefix == "" || info.ExecPrefix == "" {
		return ""
	}
	return strings.Join(append([]string{info.Prefix, info.ExecPrefix}, info.Site...), "\n")
}

// SourceArgv is argv (-I -c SOURCE args…), a program's other than the bootstrap, without site
// (-S) when info says what site adds, as the bootstrap is run: the source gets, after its
// first line, what site would have done (sitePrelude), from an argument that follows it. A
// template starts so: every child it forks inherits its heap, and site's imports were a
// third of it (docs/design.md §19.3).
func (info Info) SourceArgv(argv []string) []string {
	arg := info.siteArg()
	if arg == "" || len(argv) < 3 || argv[0] != "-I" || argv[1] != "-c" {
		return argv
	}
	first, rest, _ := strings.Cut(argv[2], "\n")
	return append([]string{"-I", "-S", "-c", first + "\nimport sys\n" + sitePrelude(1) + rest, arg}, argv[3:]...)
}

// Argv is the interpreter's argv after the interpreter itself: argv ("-I", "-c", source,
// args…) as it is, or, when info holds source compiled, the same run from the compiled code,
// and without site (-S, siteStub) when info says what site adds.
func (info Info) Argv(argv []string, source string) []string {
	if info.Code == "" || len(argv) < 3 || argv[0] != "-I" || argv[1] != "-c" || argv[2] != source {
		return argv
	}
	out := make([]string, 0, len(argv)+3)
	if arg := info.siteArg(); arg != "" {
		out = append(out, "-I", "-S", "-c", siteStub, info.Code, arg)
	} else {
		out = append(out, "-I", "-c", codeStub, info.Code)
	}
	return append(out, argv[3:]...)
}
