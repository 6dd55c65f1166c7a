package configs

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Problem is one thing wrong with a configuration, located by file, line and key path.
type Problem struct {
	Source  string // the file (or the label given to Parse); "" for a hand-built Config
	Line    int    // 1-based; 0 when unknown
	Column  int    // 1-based; 0 when unknown; orders problems on one line, not printed
	Path    string // the key path, e.g. "profiles.default.hard_limits.cpu_seconds"; "" for the document
	Message string
}

// String renders p as "source:line: path: message", leaving out the parts p does not have.
func (p Problem) String() string {
	var b strings.Builder
	if p.Source != "" {
		b.WriteString(p.Source)
		if p.Line > 0 {
			b.WriteString(":" + strconv.Itoa(p.Line))
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is every problem found in a configuration, in order of file and line. It is the
// cause (the Err) of the *failure.Error of kind ConfigInvalid that Parse, Load,
// LoadTenantsDir and Validate return, so `check` can list them with errors.As.
type Problems []Problem

// Error renders one problem per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// asError returns nil for no problems, or the problems sorted and carried by a ConfigInvalid
// failure. The main source sorts first, then other files by name, then by line.
func (ps Problems) asError(mainSource string) error {
	if len(ps) == 0 {
		return nil
	}
	ps = slices.Clone(ps)
	rank := func(s string) int {
		if s == mainSource {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(
			cmp.Compare(rank(a.Source), rank(b.Source)),
			cmp.Compare(a.Source, b.Source),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Message, b.Message),
		)
	})
	ps = slices.Compact(ps)
	return failure.Wrap(failure.ConfigInvalid, ps, "invalid configuration")
}

// position is where a key path was written.
type position struct {
	source       string
	line, column int
}

// meta is what decoding learnt that the structs do not hold: where each key path was written,
// and whether the default profile was spelled `sandbox:`.
type meta struct {
	pos                map[string]position
	defaultFromSandbox bool
	backends           []string // Options.Backends
}

// at returns where path, or its nearest written ancestor, was written.
func (m *meta) at(path string) position {
	if m == nil || m.pos == nil {
		return position{}
	}
	for p := path; ; {
		if pos, ok := m.pos[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return m.pos[""]
		}
		p = p[:i]
	}
}

func (m *meta) problem(path, format string, args ...any) Problem {
	pos := m.at(path)
	return Problem{Source: pos.source, Line: pos.line, Column: pos.column, Path: path, Message: fmt.Sprintf(format, args...)}
}

// keyPath appends a map key or field name to a path, quoting keys that would read ambiguously.
func keyPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
