package binding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// read_tool_output's defaults and bounds, for the host and a program alike.
const (
	// DefaultReadLines is the window when limit is not given.
	DefaultReadLines = 100
	// DefaultMatches is how many matching lines a pattern read returns when limit is not given.
	DefaultMatches = 100
	// MaxProgramReadBytes bounds one read a program makes, below its transfer allowance.
	MaxProgramReadBytes = 16 << 20
)

// ReadArgs are read_tool_output's arguments: a line window (Offset a 0-based line index, Limit
// a line count), or with Pattern (RE2) the matching lines with their 0-based numbers.
type ReadArgs struct {
	Handle  string  `json:"handle"`
	Offset  *int    `json:"offset"`
	Limit   *int    `json:"limit"`
	Pattern *string `json:"pattern"`
}

// Window is a line window as the reader receives it.
type Window struct {
	Text       string `json:"text"`
	Offset     int    `json:"offset"`
	Count      int    `json:"count"`
	TotalLines int    `json:"total_lines"`
	More       bool   `json:"more"`
}

// Match is one matching line.
type Match struct {
	Line    int    `json:"line"`
	Text    string `json:"text"`
	Clipped bool   `json:"clipped,omitempty"`
}

// Matches are a pattern read's answer.
type Matches struct {
	Matches    []Match `json:"matches"`
	TotalLines int     `json:"total_lines"`
	Truncated  bool    `json:"truncated"`
}

// Page is one read: Window or Matches is set. JSON is what it weighs when it crosses.
type Page struct {
	Window  *Window
	Matches *Matches
	JSON    json.RawMessage
}

// Text renders a page for a person or a model: a window's lines as they are, or one
// "N: line" per match (N the 0-based line number), then a line saying that matches were left
// out, or that no line matched. Both the host's read_tool_output and `mcp-sandbox
// read-output` show it.
func (p Page) Text() string {
	if p.Window != nil {
		return p.Window.Text
	}
	var b strings.Builder
	if p.Matches == nil {
		return ""
	}
	for _, x := range p.Matches.Matches {
		fmt.Fprintf(&b, "%d: %s\n", x.Line, x.Text)
	}
	if p.Matches.Truncated {
		b.WriteString("(more matches were left out; narrow the pattern or raise limit)\n")
	}
	if len(p.Matches.Matches) == 0 && !p.Matches.Truncated {
		b.WriteString("no line matches\n")
	}
	return b.String()
}

// Read serves one read_tool_output of a handle of tenant: the one reader behind the host's
// tool and a program's handle.read(). Who may read which handle is the caller's business (the
// host: any of its tenant's; a program: only its own execution's). A page over maxBytes, as
// JSON, is binding_result_too_large, and a pattern read is cut to fit it. Kinds: unavailable
// (no such handle for this tenant), invalid_arguments (a bad window or pattern),
// binding_result_too_large, upstream_error (the store failed; Err says how).
func Read(ctx context.Context, blobs outputs.BlobStore, tenant string, a ReadArgs, maxBytes int64) (Page, *failure.Error) {
	if blobs == nil {
		return Page{}, failure.New(failure.Unavailable, "no output is kept here: there is no blob store")
	}
	h := outputs.Handle(a.Handle)
	var p Page
	var v any
	if a.Pattern != nil && *a.Pattern != "" {
		n := DefaultMatches
		if a.Limit != nil && *a.Limit > 0 {
			n = *a.Limit
		}
		m, err := outputs.BlobSearch(ctx, blobs, tenant, h, *a.Pattern, n, int(max(min(maxBytes, math.MaxInt32)-4096, 0)))
		if err != nil {
			return Page{}, readError(err)
		}
		p.Matches = &Matches{Matches: []Match{}, TotalLines: m.TotalLines, Truncated: m.Truncated}
		for _, x := range m.Matches {
			p.Matches.Matches = append(p.Matches.Matches, Match{Line: x.Line, Text: x.Text, Clipped: x.Clipped})
		}
		v = p.Matches
	} else {
		off, lim := 0, DefaultReadLines
		if a.Offset != nil {
			off = *a.Offset
		}
		if a.Limit != nil {
			lim = *a.Limit
		}
		w, err := outputs.BlobLines(ctx, blobs, tenant, h, off, lim)
		if err != nil {
			return Page{}, readError(err)
		}
		p.Window = &Window{Text: w.Text, Offset: w.Offset, Count: w.Count, TotalLines: w.TotalLines, More: w.More}
		v = p.Window
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Page{}, failure.Wrap(failure.UpstreamError, err, "the window could not be encoded")
	}
	if int64(len(b)) > maxBytes {
		return Page{}, failure.New(failure.BindingResultTooLarge,
			"this window is %d bytes, over the %d bytes that may cross in one piece; ask for fewer lines", len(b), maxBytes)
	}
	p.JSON = b
	return p, nil
}

func readError(err error) *failure.Error {
	switch {
	case errors.Is(err, outputs.ErrNoBlob):
		return failure.Wrap(failure.Unavailable, err, "no such handle")
	case errors.Is(err, outputs.ErrBadWindow), errors.Is(err, outputs.ErrBadPattern):
		return failure.Wrap(failure.InvalidArguments, err, "%s", err.Error())
	}
	return failure.Wrap(failure.UpstreamError, err, "the handle could not be read")
}

// NoOutputKept is a host's one answer (read_tool_output, `mcp-sandbox read-output`) for a
// handle it may not read, whatever the reason: it never names the handle, so another tenant's
// handle and a never-issued one read the same.
const NoOutputKept = "no output is kept under this handle: it may have expired, or it was never issued to this tenant"

// noHandle is a program's answer for a handle its execution did not produce, whatever the
// reason, so another execution's handle reads like one never issued.
const noHandle = "no handle of this execution is known"

// ReadHandle is a program's handle.read(): a window of one of this execution's own handles,
// no wider than the transfer allowance, charged to the transfer meter.
func (x *Execution) ReadHandle(ctx context.Context, handle string, offset, limit int, pattern string) toolcall.Answer {
	return x.delivered(x.read(ctx, ReadArgs{Handle: handle, Offset: &offset, Limit: &limit, Pattern: &pattern}))
}

func (x *Execution) read(ctx context.Context, a ReadArgs) toolcall.Answer {
	x.mu.Lock()
	own := x.handles[outputs.Handle(a.Handle)]
	x.mu.Unlock()
	if !own || x.blobs == nil {
		return refuse(failure.Unavailable, noHandle)
	}
	allow := int64(MaxProgramReadBytes)
	if x.meter != nil {
		allow = min(allow, x.meter.TransferAllowance())
	}
	p, fe := Read(ctx, x.blobs, x.tenant, a, allow)
	switch {
	case fe == nil:
	case fe.Kind == failure.Unavailable:
		return refuse(failure.Unavailable, noHandle)
	default:
		return toolcall.Refused(fe)
	}
	if x.meter != nil {
		ok, err := x.meter.TryCharge(ctx, budget.Usage{TransferBytes: int64(len(p.JSON))})
		if err != nil {
			x.log.Error("handle read not charged", "err", err)
			return refuse(failure.UpstreamError, "the read could not be recorded, so it was not served")
		}
		if !ok {
			return refuse(failure.BindingResultTooLarge,
				"this window is %d bytes, over what is left of the transfer budget; ask for fewer lines", len(p.JSON))
		}
	}
	return toolcall.Answer{Value: p.JSON}
}
