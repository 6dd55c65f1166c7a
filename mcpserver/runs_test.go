package mcpserver

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
)

func TestRunOfMeta(t *testing.T) {
	h := &handlers{agent: Agent{Tenant: "t"}, runs: map[*mcp.ServerSession]string{}}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{MetaRun: "r1"}}}
	if got := h.runOf(req); got != (budget.RunRef{Tenant: "t", ID: "named:r1"}) {
		t.Errorf("runOf = %+v", got)
	}
	long := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{MetaRun: strings.Repeat("x", execution.MaxRunNameBytes+1)}}}
	if got := h.runOf(long); strings.HasPrefix(got.ID, "named:") {
		t.Errorf("an over-long run id was accepted: %+v", got)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
