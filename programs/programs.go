package programs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// DefaultPrefix is what an agent's saved programs' tool names begin with
// (`<prefix>__<name>`) when its config names none.
const DefaultPrefix = "saved"

// MaxCodeBytes bounds a saved program's text (as run_code bounds one program's).
const MaxCodeBytes = 256 << 10

// maxDescriptionBytes bounds a saved program's description.
const maxDescriptionBytes = 2000

// names are the names a program may be saved under: a lowercase Python name, without "__"
// (the separator of the tool name it is offered under). Compiled at its first use, not at
// every command's start (docs/design.md §19.10).
var names = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`) })

// ErrInvalid wraps what makes a program unsavable: its name, its text, its main.
var ErrInvalid = errors.New("programs: not a program that can be saved")

// Save checks code and saves it as tenant's program name (for agent only, when not ""), with
// description, by who: its input schema is main's signature and its version the hash of its
// text. A program saved under the name before is replaced: its version answers until now.
func Save(ctx context.Context, store budget.Programs, tenant, agent, name, code, description, by string) (budget.SavedProgram, error) {
	p, err := Check(tenant, agent, name, code, description)
	if err != nil {
		return p, err
	}
	p.SavedBy = by
	if err := store.PutProgram(ctx, p); err != nil {
		return p, err
	}
	return store.SavedProgram(ctx, tenant, name)
}

// Check is the program Save would save, or why it cannot be (ErrInvalid).
func Check(tenant, agent, name, code, description string) (budget.SavedProgram, error) {
	p := budget.SavedProgram{Tenant: tenant, Agent: agent, Name: name, Code: code, Description: strings.TrimSpace(description)}
	switch {
	case !names().MatchString(name) || strings.Contains(name, "__"):
		return p, fmt.Errorf("%w: the name %q is not a lowercase Python name of at most 48 characters without \"__\"", ErrInvalid, name)
	case len(code) > MaxCodeBytes:
		return p, fmt.Errorf("%w: the program is %d bytes, over the %d-byte limit", ErrInvalid, len(code), MaxCodeBytes)
	case len(p.Description) > maxDescriptionBytes:
		return p, fmt.Errorf("%w: the description is %d bytes, over the %d-byte limit", ErrInvalid, len(p.Description), maxDescriptionBytes)
	}
	schema, err := toolshape.MainInput(code)
	if err != nil {
		return p, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	p.InputSchema, p.Version = schema, Version(code)
	return p, nil
}

// Version is the version of a program's text: the hash of its bytes.
func Version(code string) string {
	sum := sha256.Sum256([]byte(code))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Offered returns tenant's programs offered to agent: those saved for every agent and those
// saved for it, by name.
func Offered(ctx context.Context, store budget.Programs, tenant, agent string) ([]budget.SavedProgram, error) {
	all, err := store.SavedPrograms(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(p budget.SavedProgram) bool { return !OfferedTo(p, agent) }), nil
}

// OfferedTo reports whether p is offered to agent: every agent of its tenant, or only its own.
func OfferedTo(p budget.SavedProgram, agent string) bool { return p.Agent == "" || p.Agent == agent }

// Prefix is the prefix an agent offers saved programs under when its config names configured
// ("": DefaultPrefix).
func Prefix(configured string) string {
	if configured == "" {
		return DefaultPrefix
	}
	return configured
}

// ToolName is the tool name program name is offered under with prefix.
func ToolName(prefix, name string) string { return prefix + "__" + name }

// Program is the program one call of p runs: its text, then main awaited with args (a JSON
// object its input schema admits: ArgumentsError says why not), whose value is the result's.
func Program(p budget.SavedProgram, args json.RawMessage) (string, error) {
	if err := checkArguments(p, args); err != nil {
		return "", err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return p.Code + "\n\nreturn await main(**__import__(\"json\").loads(" + strconv.QuoteToASCII(string(args)) + "))\n", nil
}

// Keywords are the keywords p's main takes (params) and those it requires.
func Keywords(p budget.SavedProgram) (params, required []string) {
	in, _, _ := toolshape.ReadInput(p.InputSchema)
	s := in.Signature()
	return s.Params, s.Required
}

// checkArguments checks a call's arguments against p's input schema.
func checkArguments(p budget.SavedProgram, args json.RawMessage) error {
	in, _, err := toolshape.ReadInput(p.InputSchema)
	if err != nil {
		return fmt.Errorf("the saved program %s's input schema cannot check arguments: %v", p.Name, err)
	}
	var v map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &v); err != nil {
			return fmt.Errorf("arguments for %s are not a JSON object: %v", p.Name, err)
		}
	}
	if v == nil {
		v = map[string]any{}
	}
	if err := in.Check(v); err != nil {
		return fmt.Errorf("arguments for %s %v", p.Name, err)
	}
	return nil
}

// Reach returns which of the tools a program may call (each a name, and the Python name it is
// bound as, when it has one) the program code can reach: those it names as a word. A program
// that names a tool only at run time (call_tool, or TOOLS) can reach them all: nil.
func Reach(code string, tools [][2]string) []string {
	for _, dynamic := range []string{"call_tool", "TOOLS", "globals", "getattr", "eval", "exec", "__import__", "vars"} {
		if containsWord(code, dynamic) {
			return nil
		}
	}
	out := []string{}
	for _, t := range tools {
		if containsWord(code, t[0]) || (t[1] != "" && containsWord(code, t[1])) {
			out = append(out, t[0])
		}
	}
	return out
}

// containsWord reports whether w occurs in s with no name character either side.
func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(w)
		if (at == 0 || !nameByte(s[at-1])) && (end == len(s) || !nameByte(s[end])) {
			return true
		}
		i = at + 1
	}
}

func nameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
