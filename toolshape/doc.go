// Package toolshape is what an upstream tool looks like to a program, a model and a person:
// its input schema read once into one model (Schema, ParseSchema) that every reader shares,
// the keyword signature a binding takes (Signature), the Python stub get_tool_info shows
// (Stub), what a person or a log line sees of a call's arguments (Redact, ApprovalView), and
// the validator a call's arguments are checked by within bounds an untrusted schema cannot
// escape (Input, validate.go). Package upstream reads each tool's schemas when it admits the
// tool (ReadInput) and answers through its Tool's methods; an observed result type is a JSON
// Schema the same parser reads. The model and its readers: docs/design.md §13.3, §13.5, §3.5.
//
// It imports jsonschema-go (the validator) and the standard library, never upstream or
// anything of the engine. Its values are immutable once read and safe for concurrent use.
package toolshape
