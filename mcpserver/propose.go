package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/programs"
)

// ToolSaveProgram is the built-in through which the model proposes saving a program
// (docs/design.md §23), offered to an agent whose config says programs: {propose: true}.
const ToolSaveProgram = approval.SaveTool

// addSaveProgram offers save_program: a proposal the person (or an operator) sees whole and
// must accept before anything is saved (approval.Asking.AskSave, through the same paths as any
// question); declined, unanswered or unaskable, nothing is saved.
func (h *handlers) addSaveProgram() {
	h.srv.AddTool(&mcp.Tool{
		Name:  ToolSaveProgram,
		Title: "Propose saving a program as a tool",
		Description: "Proposes saving a Python program that worked as a tool " + h.agent.Programs.prefix() + "__<name>, called later with arguments instead of its text. " +
			"It must define `async def main(...)` with an annotation on each parameter (str, int, float, bool, list, dict); a call runs it and returns main's value. " +
			"A person sees the whole text and must accept; nothing is saved otherwise. Saving under a saved name makes a new version.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"a lowercase Python name"},"code":{"type":"string"},"description":{"type":"string"}},"required":["name","code","description"],"additionalProperties":false}`),
	}, h.proposeProgram)
}

func (h *handlers) proposeProgram(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Name        string `json:"name"`
		Code        string `json:"code"`
		Description string `json:"description"`
	}
	if bad := decodeArgs(req, &in); bad != nil {
		return bad, nil
	}
	// What could not be saved is refused before anyone is asked.
	if _, err := programs.Check(h.agent.Tenant, h.agent.Name, in.Name, in.Code, in.Description); err != nil {
		return toolError("%v", err), nil
	}
	return h.serveCall(ctx, req, func(ctx context.Context, env callEnv) *mcp.CallToolResult {
		by, _, fe := env.asking.AskSave(ctx, approval.SaveProposal{Name: in.Name, Description: in.Description, Code: in.Code})
		if fe != nil {
			return toolError("%s (%s)", fe.Message, fe.Kind)
		}
		who := "person"
		if by != "" {
			who = "person " + by
		}
		p, err := programs.Save(context.WithoutCancel(ctx), h.opts.Ledger, h.agent.Tenant, h.agent.Name, in.Name, in.Code, in.Description, who)
		if err != nil {
			h.log.Error("an accepted program not saved", "program", in.Name, "err", err)
			return toolError("the person accepted, but the program could not be saved: %v", err)
		}
		h.log.Info("program saved on the model's proposal", "program", p.Name, "version", p.Version, "by", who)
		h.syncPrograms(ctx, h.turn(ctx))
		out := map[string]string{"saved": p.Name, "tool": programs.ToolName(h.agent.Programs.prefix(), p.Name), "version": p.Version}
		b, _ := json.Marshal(out)
		return &mcp.CallToolResult{StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
	}), nil
}
