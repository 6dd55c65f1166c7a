package toolcall

import (
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Answer is what one binding call or handle read hands back to the program: a value, a Handle
// for a result kept under one, or a failure the program sees as ToolError(Kind). It is the one
// type of a call's answer from the upstream pool (upstream.Turn.Invoke) through the binding
// step and the engine (engine.ToolCaller) to the program's channel, there and over the remote
// protocol.
type Answer struct {
	// Value is the JSON value delivered whole; nil means null. Unset when Handle or Kind is.
	Value json.RawMessage `json:"value,omitempty"`
	// Handle, when set, stands for a result too large to hand over whole.
	Handle *Handle `json:"handle,omitempty"`
	// Kind is empty on success, else one of failure.CallKinds.
	Kind failure.Kind `json:"kind,omitempty"`
	// Message says why, in words safe to show a model.
	Message string `json:"message,omitempty"`
}

// Refused returns the Answer of a call that failed with fe.
func Refused(fe *failure.Error) Answer { return Answer{Kind: fe.Kind, Message: fe.Message} }

// Handle stands for a result too large to hand over whole: the id it is kept under (an
// outputs.Handle), and how many bytes and lines the kept content has, so the program can page
// it. It is the one type of a handle as a program, the engine and a remote caller see it.
type Handle struct {
	ID    string `json:"id"`
	Size  int64  `json:"size"`
	Lines int    `json:"lines"`
}
