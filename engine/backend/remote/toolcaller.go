package remote

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// This file is the protocol's only contact with engine.ToolCaller and outputs.Reply: on
// the service, a ToolCaller that forwards each call to the caller as a frame; on the client,
// the call that answers such a frame through the caller's own ToolCaller (its policy, budgets
// and ledger).

// forwarder is the ToolCaller the service hands its local Runner: every call and read
// becomes a frame on the execution's stream, and waits for the caller's Reply.
type forwarder struct{ x *serviceExecution }

func (f forwarder) CallTool(ctx context.Context, name string, args json.RawMessage) outputs.Reply {
	return f.x.forward(ctx, func(id int64) any {
		return &Call{Type: FrameCall, ID: id, Tool: name, Args: args}
	})
}

func (f forwarder) ReadHandle(ctx context.Context, handle string, offset, limit int, pattern string) outputs.Reply {
	return f.x.forward(ctx, func(id int64) any {
		return &Read{Type: FrameRead, ID: id, Handle: handle, Offset: offset, Limit: limit, Pattern: pattern}
	})
}

// forward writes the frame mk makes for a fresh id and waits for the caller's Reply. Ids are
// taken under the writer's lock, so they reach the stream in increasing order.
func (x *serviceExecution) forward(ctx context.Context, mk func(id int64) any) outputs.Reply {
	ch := make(chan Reply, 1)
	var id int64
	err := x.w.numbered(func(n int64) any {
		id = n
		x.mu.Lock()
		x.pending[id] = ch
		x.mu.Unlock()
		return mk(n)
	})
	defer func() {
		x.mu.Lock()
		delete(x.pending, id)
		x.mu.Unlock()
	}()
	if err != nil {
		return outputs.Reply{Kind: failure.Cancelled, Message: "the caller of this execution went away"}
	}
	select {
	case rep := <-ch:
		return rep.toolReply()
	case <-ctx.Done():
		return outputs.Reply{Kind: failure.Cancelled, Message: "the execution ended before the caller answered"}
	}
}

// toolReply is the ToolReply a Reply carries.
func (r *Reply) toolReply() outputs.Reply {
	if !r.OK {
		return outputs.Reply{Kind: failure.Kind(r.Kind), Message: r.Message}
	}
	if r.Handle != nil {
		return outputs.Reply{Handle: &outputs.HandleRef{ID: outputs.Handle(r.Handle.ID), Size: r.Handle.Size, Lines: r.Handle.Lines}}
	}
	return outputs.Reply{Value: r.Value}
}

// check reports what makes a Reply unusable.
func (r *Reply) check() error {
	switch {
	case r.ID <= 0:
		return fmt.Errorf("id must be positive")
	case r.OK && r.Kind != "":
		return fmt.Errorf("an ok reply carries no kind")
	case r.OK && r.Handle != nil && len(r.Value) > 0:
		return fmt.Errorf("an ok reply carries a value or a handle, not both")
	case r.OK && r.Handle != nil && r.Handle.ID == "":
		return fmt.Errorf("a handle needs an id")
	case !r.OK && !toolErrorKind(r.Kind):
		return fmt.Errorf("a failed reply needs a kind of lowercase letters and '_'")
	case !r.OK && (len(r.Value) > 0 || r.Handle != nil):
		return fmt.Errorf("a failed reply carries no value or handle")
	}
	return nil
}

func toolErrorKind(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// answer runs one call or read frame through the caller's ToolCaller and returns the Reply
// to post. A caller without a ToolCaller answers unavailable, as a local Runner does.
func answer(ctx context.Context, tools engine.ToolCaller, frame any) Reply {
	var id int64
	var rep outputs.Reply
	switch f := frame.(type) {
	case *Call:
		id = f.ID
		if tools == nil {
			rep = outputs.Reply{Kind: failure.Unavailable, Message: fmt.Sprintf("no tool named %q is offered to this program; TOOLS lists what is", f.Tool)}
		} else {
			rep = tools.CallTool(ctx, f.Tool, f.Args)
		}
	case *Read:
		id = f.ID
		if tools == nil {
			rep = outputs.Reply{Kind: failure.Unavailable, Message: "no handle of this execution is known"}
		} else {
			rep = tools.ReadHandle(ctx, f.Handle, f.Offset, f.Limit, f.Pattern)
		}
	}
	out := Reply{ID: id, OK: rep.Kind == ""}
	switch {
	case !out.OK:
		out.Kind, out.Message = string(rep.Kind), rep.Message
	case rep.Handle != nil:
		out.Handle = &Handle{ID: string(rep.Handle.ID), Size: rep.Handle.Size, Lines: rep.Handle.Lines}
	default:
		out.Value = rep.Value
		if len(out.Value) == 0 {
			out.Value = json.RawMessage("null")
		}
	}
	return out
}
