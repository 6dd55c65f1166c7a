package binding

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// maxShownArguments bounds the arguments a log line holds.
const maxShownArguments = 2000

// maxRedactedArguments bounds a question's Redacted arguments: as a journal keeps them
// (package cassette's bound), so a resumed call compares equal.
const maxRedactedArguments = 64 << 10

// maxQuestionArguments bounds the arguments a question shows; arguments that take more to
// show in full are not put to a person (upstream.Tool.ApprovalView).
const maxQuestionArguments = 16 << 10

// approve is the approval step of a call (docs/design.md §12.2, hop 5): the policy's word on
// the call's arguments (an argument rule may deny it), then, when the call needs a person's
// approval, the question, put through a (package approval: asked, kept as a pause, answered
// from any path, recorded). The call may proceed when the returned error is nil, under callID
// when that is not empty (the id its approval record names): id, the one chosen for it, when
// not empty. qs are the execution's questions (nil for a direct call); seq is the call's number
// on its tape (0: none); by, when set, is left who answered.
func approve(ctx context.Context, a *approval.Asking, turn *upstream.Turn, tool *upstream.Tool, args json.RawMessage,
	meter *budget.Meter, log *slog.Logger, qs *approval.Questions, seq int, by *string, id string) (approval.Decision, string, *failure.Error) {
	reasons, fe := turn.Approval(tool, args)
	if fe != nil || len(reasons) == 0 {
		return approval.NotNeeded, id, fe
	}
	// A question shows everything that decides it, or is not asked (Incomplete says why).
	view, incomplete := tool.ApprovalView(args, maxQuestionArguments)
	return a.Ask(ctx, approval.Call{Tool: tool.Name, Reasons: reasons, Arguments: view, Incomplete: incomplete,
		Redacted: tool.RedactArguments(args, maxRedactedArguments), Logged: tool.RedactArguments(args, maxShownArguments),
		InProgram: qs != nil, Seq: seq, Meter: meter, Log: log, Questions: qs, AnsweredBy: by, CallID: id})
}
