package programs

import (
	"encoding/json"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// Info is what get_tool_info says of a saved program offered under a prefix, in the shape it
// says of any tool: the program's tool name (also its Python name), its description and
// version, main's input schema, and its Python stub, which returns Any (a program's value has
// no declared type).
type Info struct {
	Name        string          `json:"name"`
	Alias       string          `json:"alias"`
	Server      string          `json:"server"`
	Description string          `json:"description"`
	Version     string          `json:"version"`
	InputSchema json.RawMessage `json:"input_schema"`
	PythonStub  string          `json:"python_stub"`
}

// Summary is what list_tools says of one: its tool name and the first line of its description.
type Summary struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
}

// Describe is what get_tool_info says of p offered under prefix.
func Describe(prefix string, p budget.SavedProgram) Info {
	name := ToolName(prefix, p.Name)
	in, _, _ := toolshape.ReadInput(p.InputSchema)
	alias := ""
	if toolshape.Aliasable(name) {
		alias = name
	}
	return Info{Name: name, Alias: alias, Server: prefix, Description: p.Description, Version: p.Version, InputSchema: p.InputSchema,
		PythonStub: toolshape.Stub(toolshape.StubOf{Name: name, Alias: alias, Summary: firstLine(strings.TrimSpace(p.Description)), Input: in})}
}

// Summarize is what list_tools says of p offered under prefix.
func Summarize(prefix string, p budget.SavedProgram) Summary {
	return Summary{Name: ToolName(prefix, p.Name), Description: firstLine(p.Description), Version: p.Version}
}
