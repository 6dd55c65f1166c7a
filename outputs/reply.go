package outputs

import (
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Reply is what one binding call or handle read hands into the sandbox: a value, a HandleRef
// for a result kept in the blob store, or a failure the program sees as ToolError(Kind).
//
// It lives here, a leaf both sides import, because the engine asks for it (engine.ToolCaller)
// and package binding answers with it, and neither may import the other (docs/design.md §2).
type Reply struct {
	// Value is the JSON value delivered whole; nil means null. Unset when Handle or Kind is.
	Value json.RawMessage
	// Handle, when set, stands for a result too large to hand over whole.
	Handle *HandleRef
	// Kind is empty on success, else one of failure.CallKinds.
	Kind failure.Kind
	// Message says why, in words safe to show a model.
	Message string
}

// Refused returns the Reply of a call that failed with fe.
func Refused(fe *failure.Error) Reply { return Reply{Kind: fe.Kind, Message: fe.Message} }

// HandleRef is a handle as a program receives it: what it names, how many bytes and lines the
// kept content has, so the program can page it.
type HandleRef struct {
	ID    Handle
	Size  int64
	Lines int
}
