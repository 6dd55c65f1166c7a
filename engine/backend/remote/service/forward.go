package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// This file is the service's contact with engine.ToolCaller: a ToolCaller that forwards each
// call to the caller as a frame and waits for the result the caller posts.

// forwarder is the ToolCaller the service hands its local Runner: every call and read
// becomes a frame on the execution's stream, and waits for the caller's answer.
type forwarder struct{ x *serviceExecution }

func (f forwarder) CallTool(ctx context.Context, name string, args json.RawMessage) toolcall.Answer {
	return f.x.forward(ctx, func(id int64) any {
		return &wire.Call{Type: wire.TypeCall, ID: id, Tool: name, Args: args}
	})
}

func (f forwarder) ReadHandle(ctx context.Context, handle string, offset, limit int, pattern string) toolcall.Answer {
	return f.x.forward(ctx, func(id int64) any {
		return &wire.Read{Type: wire.TypeRead, ID: id, Handle: handle, Offset: offset, Limit: limit, Pattern: pattern}
	})
}

// forward writes the frame mk makes for a fresh id and waits for the caller's answer. Ids are
// taken under the writer's lock, so they reach the stream in increasing order.
func (x *serviceExecution) forward(ctx context.Context, mk func(id int64) any) toolcall.Answer {
	ch := make(chan *wire.Result, 1)
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
		return toolcall.Answer{Kind: failure.Cancelled, Message: "the caller of this execution went away"}
	}
	select {
	case rep := <-ch:
		return rep.Answer
	case <-ctx.Done():
		return toolcall.Answer{Kind: failure.Cancelled, Message: "the execution ended before the caller answered"}
	}
}

// checkReply reports what makes a posted result unusable.
func checkReply(r *wire.Result) error {
	switch {
	case r.Type != wire.TypeResult:
		return fmt.Errorf("type must be %q", wire.TypeResult)
	case r.ID <= 0:
		return fmt.Errorf("id must be positive")
	case r.OK && r.Kind != "":
		return fmt.Errorf("an ok reply carries no kind")
	case r.OK && r.Handle != nil && len(r.Value) > 0:
		return fmt.Errorf("an ok reply carries a value or a handle, not both")
	case r.OK && r.Handle != nil && r.Handle.ID == "":
		return fmt.Errorf("a handle needs an id")
	case !r.OK && !toolErrorKind(string(r.Kind)):
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
