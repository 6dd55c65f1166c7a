package upstream

import (
	"context"
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// StandIn is the value a rehearsal hands a program instead of calling tool (docs/design.md
// §22): shaped by its declared output schema, else by the type observed of its results, else
// null (toolshape.StandIn).
func (t *Turn) StandIn(ctx context.Context, tool *Tool) json.RawMessage {
	s := tool.output
	if s == nil {
		if _, observed := t.observations().outputType(ctx, tool); observed != nil {
			s = toolshape.ParseSchema(observed)
		}
	}
	return toolshape.StandIn(s)
}

// ReadOnlyTool reports whether tool's server annotates it read-only (readOnlyHint): a
// rehearsal calls such a tool for real and lists every other call instead.
func ReadOnlyTool(tool *Tool) bool {
	return tool.Def != nil && tool.Def.Annotations != nil && tool.Def.Annotations.ReadOnlyHint
}
