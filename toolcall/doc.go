// Package toolcall is the one type of a tool call's answer (Answer) and of a handle to a result
// kept for paging (Handle): what the upstream pool answers a call with (upstream.Turn.Invoke),
// what package binding hands the engine through engine.ToolCaller, what the program's channel
// and the remote protocol carry (engine/wire's result frame embeds an Answer), and what a
// cassette records. It is a leaf every package on a call's path imports, so upstream needs
// nothing of the engine's and the engine nothing of the upstream's (docs/design.md §2).
//
// It imports failure (an Answer's Kind) and the standard library. Its values are plain data,
// safe to copy and to share between goroutines once built.
package toolcall
