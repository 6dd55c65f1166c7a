package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// A running task's output so far (docs/design.md §14.6): the engine hands its progress tick
// the program's stdout capture, and the task's status writer, each poll interval, keeps what
// it holds so far under a handle of the blob store (read_tool_output pages it) and puts its
// last bytes and that handle in the status message, which travels in the task's row to
// whichever process answers tasks/get. A handle is a blob's, written once: each tick that saw
// new output keeps a new one, and the one before the previous is deleted, so a client that
// read the last message still reads its handle for one more interval, and a task holds at
// most two captures' worth of the store. Both go once the program stopped, before its whole
// output is kept, which they would otherwise keep from the room the tenant's blob quota leaves
// (execution.Program.Ran): its result has the whole output's own handle.

// outputTailBytes is how much of the output's end a status message quotes.
const outputTailBytes = 240

// partialOutput is a running task's output so far, as its status writer keeps it. Only the
// status writer's goroutine touches its fields but stdout.
type partialOutput struct {
	// stdout is the program's capture, set by the engine's progress tick (nil before, and
	// from a backend that shows output only at the end).
	stdout atomic.Pointer[outputs.Capture]
	size   int64 // the size kept under handles[1]
	// handles are the previous and the newest partial output's ("" when none).
	handles [2]outputs.Handle
}

// progress is the engine's Progress callback: it notes the capture, nothing more (it runs on
// the execution's loop).
func (p *partialOutput) progress(_ float64, stdout *outputs.Capture) {
	if stdout != nil {
		p.stdout.Store(stdout)
	}
}

// outputSoFar is the part of the status message on the output so far ("" when there is none):
// its last bytes and the handle that reads it, kept now when it grew since the last tick.
func (h *handlers) outputSoFar(ctx context.Context, p *partialOutput) string {
	c := p.stdout.Load()
	if c == nil || c.Size() == 0 {
		return ""
	}
	if size := c.Size(); size != p.size && h.opts.Blobs != nil {
		kept := c.Bytes()
		hd, _, err := h.opts.Blobs.Put(ctx, h.agent.Tenant, "stdout so far", "text/plain", bytes.NewReader(kept), int64(len(kept))+1)
		if err != nil {
			h.log.Warn("a task's output so far not kept", "err", err)
		} else {
			h.dropPartial(ctx, p.handles[0])
			p.handles, p.size = [2]outputs.Handle{p.handles[1], hd}, size
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "; output so far (%d bytes), ending: %s", c.Size(), strconv.Quote(lastText(c.Tail(), outputTailBytes)))
	if hd := p.handles[1]; hd != "" {
		fmt.Fprintf(&sb, "; read_tool_output(handle=%q) reads it", string(hd))
		if c.Truncated() {
			fmt.Fprintf(&sb, " (its first %d bytes)", len(c.Bytes()))
		}
	}
	return sb.String()
}

// dropPartials deletes a task's partial outputs, once its program stopped.
func (h *handlers) dropPartials(ctx context.Context, p *partialOutput) {
	for _, hd := range p.handles {
		h.dropPartial(ctx, hd)
	}
}

func (h *handlers) dropPartial(ctx context.Context, hd outputs.Handle) {
	if hd == "" {
		return
	}
	if err := h.opts.Blobs.Delete(ctx, h.agent.Tenant, hd); err != nil {
		h.log.Warn("a task's partial output not deleted", "handle", string(hd), "err", err)
	}
}

// lastText is the last n bytes of b at most, from a rune's start, as valid UTF-8 (an invalid
// byte reads U+FFFD).
func lastText(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
