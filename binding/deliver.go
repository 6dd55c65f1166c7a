package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// deliver turns the upstream's answer into what the program receives, and what
// tool_call_finished records of it. tk nil (nothing metered): the value crosses whole.
func (x *Execution) deliver(ctx context.Context, tk *budget.Ticket, tool *upstream.Tool, a toolcall.Answer, spent upstream.Spent) (toolcall.Answer, budget.CallFinish) {
	o := outcome(a, spent)
	if a.Kind != "" {
		return toolcall.Answer{Kind: a.Kind, Message: a.Message}, o
	}
	// A value the program's JSON decoder would die on (Python's recurses) is never sent: the
	// program would wait for its answer until its wall clock.
	if d := upstream.NestingDepth(a.Value); d > maxResultDepth {
		o.Status, o.Kind = budget.Failed, string(failure.InvalidResult)
		o.Message = fmt.Sprintf("the result of %s nests %d levels deep, more than the %d a program is handed; it was not handed over", tool.Name, d, maxResultDepth)
		return toolcall.Answer{Kind: failure.InvalidResult, Message: o.Message}, o
	}
	if tk == nil {
		return toolcall.Answer{Value: a.Value}, o
	}
	// The bytes are promised before they cross: calls racing for the last of the budget
	// cannot all have it.
	if tk.Reserve(budget.Usage{TransferBytes: int64(len(a.Value))}) {
		o.Usage.TransferBytes = int64(len(a.Value))
		return toolcall.Answer{Value: a.Value}, o
	}
	allow := tk.TransferAllowance()
	ref, ctype, why := x.page(ctx, tk, tool, a.Value)
	if ref == nil {
		o.Status, o.Kind = budget.Failed, string(failure.BindingResultNotPaged)
		o.Message = fmt.Sprintf("the result of %s is %d bytes, over the %d bytes this call may hand over, and %s", tool.Name, len(a.Value), allow, why)
		return toolcall.Answer{Kind: failure.BindingResultNotPaged, Message: o.Message}, o
	}
	o.Usage.TransferBytes = int64(len(handleJSON(ref)))
	o.Usage.PreservedBytes = ref.Size
	o.Attachments, _ = json.Marshal([]outputs.Attachment{{Name: tool.Name, Handle: string(ref.ID), ContentType: ctype,
		Size: ref.Size, Truncated: true, Location: "blob"}})
	return toolcall.Answer{Handle: ref}, o
}

// maxResultDepth bounds how deep a value handed to a program nests: well within Python's
// default recursion limit (1000), which its JSON decoder counts against, wherever the program
// awaits the call.
const maxResultDepth = 256

// page keeps a value over the transfer allowance in the blob store, charged as preserved bytes
// and the handle's own bytes as transfer, and records the handle as this execution's. When it
// cannot, ref is nil and why says so, as the end of a sentence.
func (x *Execution) page(ctx context.Context, tk *budget.Ticket, tool *upstream.Tool, v json.RawMessage) (ref *toolcall.Handle, ctype, why string) {
	if x.blobs == nil {
		return nil, "", "there is no blob store to keep it under a handle"
	}
	content, ctype := HandleContent(v)
	// No more than the content: a store under a quota holds back what a Put may take.
	limit := min(x.meter.PreservedAllowance(), int64(len(content)))
	h, n, err := x.blobs.Put(ctx, x.tenant, tool.Name, ctype, bytes.NewReader(content), limit)
	if err != nil {
		x.log.Warn("binding result not preserved", "tool", tool.Name, "bytes", len(content), "err", err)
		if errors.Is(err, outputs.ErrOverQuota) {
			return nil, "", "it could not be kept under a handle: " + err.Error()
		}
		return nil, "", "it could not be kept under a handle"
	}
	ref = &toolcall.Handle{ID: string(h), Size: n, Lines: lineCount(content)}
	if !tk.Reserve(budget.Usage{PreservedBytes: n, TransferBytes: int64(len(handleJSON(ref)))}) {
		// A concurrent call took what was left between the store's limit and now.
		_ = x.blobs.Delete(ctx, x.tenant, h)
		return nil, "", "the budget has no room left to keep it under a handle"
	}
	x.mu.Lock()
	x.handles[h] = true
	x.mu.Unlock()
	return ref, ctype, ""
}

// handleJSON is the handle as it crosses into the sandbox, for the transfer meter.
func handleJSON(ref *toolcall.Handle) []byte {
	b, _ := json.Marshal(map[string]any{"id": ref.ID, "size": ref.Size, "lines": ref.Lines})
	return b
}

// HandleContent is what a handle keeps of a value: a string's text (so its lines are the
// text's lines), or the value's JSON indented by two spaces, so that line windows
// (handle.read(offset, limit), read_tool_output) can be narrower than the whole value.
func HandleContent(v json.RawMessage) ([]byte, string) {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return []byte(s), "text/plain"
	}
	var b bytes.Buffer
	b.Grow(len(v) + len(v)/4)
	if json.Indent(&b, v, "", "  ") != nil {
		return v, "application/json"
	}
	return b.Bytes(), "application/json"
}

func lineCount(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}
