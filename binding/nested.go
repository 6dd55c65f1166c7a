package binding

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// Nested are the saved programs a program may call like bindings (docs/design.md §23): each
// by its tool name, with the keywords its main takes. A call of one is its own execution
// (its calls walk their own hops under the same Run), whose value is the answer.
type Nested interface {
	// Programs are the keywords each takes, by tool name.
	Programs() map[string]Keywords
	// Call runs the saved program name with args and returns its value, or why it failed.
	Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, *failure.Error)
	// List is what list_tools adds of them to a listing's page (the host's saved_programs:
	// on the first page of every server's listing, those a query matches), nil for none.
	List(a upstream.ListToolsArgs) any
	// Describe is what get_tool_info says of the saved program name (its stub included).
	Describe(name string) any
}

// Keywords are the keywords a saved program's main takes, and those it requires.
type Keywords struct {
	Params, Required []string
}

// signatures are nested's programs' keywords as the engine is handed a binding's.
func signatures(nested Nested) map[string]toolshape.Signature {
	out := map[string]toolshape.Signature{}
	for name, k := range nested.Programs() {
		out[name] = toolshape.Signature{Params: k.Params, Required: k.Required}
	}
	return out
}

// nestedNames are the tool names of x's saved programs, sorted; none without them.
func (x *Execution) nestedNames() []string {
	if x.nested == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(x.nestedSigs))
}

// callNested answers a call of a saved program, ok false when name is none.
func (x *Execution) callNested(ctx context.Context, name string, args json.RawMessage) (_ toolcall.Answer, ok bool) {
	if _, ok := x.nestedSigs[name]; !ok || x.nested == nil {
		return toolcall.Answer{}, false
	}
	v, fe := x.nested.Call(ctx, name, args)
	if fe != nil {
		return toolcall.Refused(fe), true
	}
	return toolcall.Answer{Value: v}, true
}

// nestedInfo is get_tool_info's answer for a saved program, ok false when name is none.
func (x *Execution) nestedInfo(name string) (_ any, ok bool) {
	if _, ok := x.nestedSigs[name]; !ok || x.nested == nil {
		return nil, false
	}
	return x.nested.Describe(name), true
}

// listing is list_tools' answer: the page, and beside it the saved programs x may call that the
// listing names (saved_programs, as the host's list_tools gives them), when there are any.
func (x *Execution) listing(a upstream.ListToolsArgs, page upstream.ListToolsPage) any {
	if x.nested == nil {
		return page
	}
	saved := x.nested.List(a)
	if saved == nil {
		return page
	}
	return struct {
		upstream.ListToolsPage
		SavedPrograms any `json:"saved_programs"`
	}{page, saved}
}
