// Package failure holds the kinds of failure an execution's result can carry (ResultKinds), the
// kinds a binding call can fail with (CallKinds, a program's ToolError.kind), and the Error
// type that carries one across package boundaries. Both lists are pinned by a golden test.
//
// Kind strings are permanent API: they appear in the result JSON that hosts, models and tests
// branch on, so a kind is added and never renamed. An Error's Message is safe to show a model;
// its Err is for the operator's log and never reaches a result.
//
// It imports the standard library only. Values are immutable and safe for concurrent use.
package failure
