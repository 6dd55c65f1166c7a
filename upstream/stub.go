package upstream

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/nearest"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// Signature returns the keyword set the tool's binding accepts, read from the top level of
// its input schema (toolshape.Signature); any keyword when it has none.
func (t *Tool) Signature() toolshape.Signature { return t.input.Signature() }

// Signatures maps each of Names to the keywords its binding takes.
func (t *Turn) Signatures() map[string]toolshape.Signature {
	out := map[string]toolshape.Signature{}
	for _, n := range t.Names() {
		out[n] = t.bound[n].Signature()
	}
	return out
}

// CheckKeywords checks a program's arguments against the binding's keyword set: an argument the
// tool does not take, or a required one missing, is invalid_arguments naming it.
func (t *Tool) CheckKeywords(args map[string]any) *failure.Error {
	return checkKeywords(t.Signature(), t.Name, args)
}

func checkKeywords(sig toolshape.Signature, name string, args map[string]any) *failure.Error {
	if !sig.Open {
		known := make(map[string]bool, len(sig.Params))
		for _, p := range sig.Params {
			known[p] = true
		}
		var unknown []string
		for k := range args {
			if !known[k] {
				unknown = append(unknown, k)
			}
		}
		sort.Strings(unknown)
		if len(unknown) > 0 {
			k := unknown[0]
			msg := fmt.Sprintf("%s takes no argument %s", name, strconv.Quote(toolshape.Clip(k, 100)))
			if near, ok := nearest.Name(k, sig.Params); ok {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			if len(sig.Params) == 0 {
				msg += "; it takes no arguments"
			} else {
				msg += "; it takes " + toolshape.Clip(strings.Join(sig.Params, ", "), 400)
			}
			return refusal(failure.InvalidArguments, "%s", msg)
		}
	}
	for _, r := range sig.Required {
		if _, ok := args[r]; !ok {
			return refusal(failure.InvalidArguments, "%s is missing its required argument %s", name, strconv.Quote(toolshape.Clip(r, 100)))
		}
	}
	return nil
}

// PythonStub renders the tool as a Python stub (toolshape.Stub): what a program may rely on.
func (t *Tool) PythonStub() string { return t.pythonStubReturning(nil, OutputType{}) }

// pythonStubReturning is PythonStub with the return type from observed, a JSON Schema of the
// results seen (nil: none), marked by a comment saying so and how many results it comes from.
// A declared output schema wins: a tool with one is never observed.
func (t *Tool) pythonStubReturning(observed []byte, ot OutputType) string {
	src := toolshape.StubOf{Name: t.Name, Alias: t.Alias(), Input: t.input, Output: t.output}
	if t.Def != nil {
		src.Summary = t.Summary()
	}
	if declared := t.Def != nil && t.Def.OutputSchema != nil; !declared && observed != nil {
		src.Output = toolshape.ParseSchema(observed)
		if ot.Source == OutputObserved {
			src.Observed.Samples, src.Observed.Drifted = ot.Samples, len(ot.Drift) > 0
		}
	}
	return toolshape.Stub(src)
}
