package remote

import (
	"context"
	"fmt"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// This file is the client's contact with engine.ToolCaller: the call that answers a call or
// read frame through the caller's own ToolCaller (its policy, budgets and ledger). The
// service's side, which forwards each call to the caller as a frame, is package service.

// answer runs one call or read frame through the caller's ToolCaller and returns the result
// to post. A caller without a ToolCaller answers unavailable, as a local Runner does.
func answer(ctx context.Context, tools engine.ToolCaller, frame any) *wire.Result {
	var id int64
	var rep toolcall.Answer
	switch f := frame.(type) {
	case *wire.Call:
		id = f.ID
		if tools == nil {
			rep = toolcall.Answer{Kind: failure.Unavailable, Message: fmt.Sprintf("no tool named %q is offered to this program; TOOLS lists what is", f.Tool)}
		} else {
			rep = tools.CallTool(ctx, f.Tool, f.Args)
		}
	case *wire.Read:
		id = f.ID
		if tools == nil {
			rep = toolcall.Answer{Kind: failure.Unavailable, Message: "no handle of this execution is known"}
		} else {
			rep = tools.ReadHandle(ctx, f.Handle, f.Offset, f.Limit, f.Pattern)
		}
	}
	out := wire.ResultOf(id, rep)
	out.Type = wire.TypeResult
	return out
}
