package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// maxShellReadBytes bounds one read-output page: a person's terminal or file takes more than
// a model's context (read_tool_output's 1 MiB), still within what a program may read.
const maxShellReadBytes = binding.MaxProgramReadBytes

func runReadOutput(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("read-output", readOutputUsage, stdout, stderr)
	tenant := fs.String("tenant", "", "tenant the handle was issued to (default: the only one)")
	offset := fs.Int("offset", 0, "first line of the window, 0-based")
	limit := fs.Int("limit", binding.DefaultReadLines, "lines in the window; with --pattern, matching lines at most")
	pattern := fs.String("pattern", "", "a regular expression (RE2): print the matching lines with their 0-based numbers instead of a window")
	asJSON := fs.Bool("json", false, "print the page as JSON, as read_tool_output's structuredContent")
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage, usagef("want exactly one handle (h_…, from a result's attachments)")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	tname, err := pickTenant(cfg, *tenant)
	if err != nil {
		return exitUsage, err
	}
	blobs, closeBlobs, err := assembly.OpenBlobs(ctx, cfg)
	if err != nil {
		return exitCode(err), err
	}
	defer closeBlobs()
	in := binding.ReadArgs{Handle: fs.Arg(0), Offset: offset, Limit: limit}
	if fs.Changed("pattern") {
		in.Pattern = pattern
	}
	p, fe := binding.Read(ctx, blobs, tname, in, maxShellReadBytes)
	switch {
	case fe == nil:
	case fe.Kind == failure.Unavailable:
		// The same words for another tenant's handle and a never-issued one.
		return exitFailure, fmt.Errorf("%s", binding.NoOutputKept)
	case fe.Kind == failure.InvalidArguments || fe.Kind == failure.BindingResultTooLarge:
		return exitUsage, usagef("%s", fe.Message)
	default:
		return exitFailure, fmt.Errorf("the output could not be read: %w", fe)
	}
	if *asJSON {
		_, err := stdout.Write(append(p.JSON, '\n'))
		return exitOK, err
	}
	if _, err := io.WriteString(stdout, p.Text()); err != nil {
		return exitFailure, err
	}
	if w := p.Window; w != nil && w.More {
		fmt.Fprintf(stderr, "(lines %d to %d of %d; --offset %d reads on)\n", w.Offset, w.Offset+w.Count-1, w.TotalLines, w.Offset+w.Count)
	}
	return exitOK, nil
}

const readOutputUsage = `Usage: mcp-sandbox read-output [--config FILE] [--tenant T] [--offset N] [--limit N] [--pattern RE] [--json] HANDLE

Prints an output kept under a handle: a stream or artifact of a run_code or "mcp-sandbox run"
result (its attachments and artifacts name the handles), or a large tool result. It is
read_tool_output for a person at a shell, over the same blob store (data_dir, or
blobs.postgres) and the same tenant's handles.

By default it prints lines --offset (0-based) to --offset+--limit (100 lines) as they are,
and says on stderr where the next window starts when more lines follow. With --pattern it
prints the matching lines (at most --limit), each as "N: line" with its 0-based number.
--json prints the page as read_tool_output's structuredContent.

Exit status: 0 when the page was printed, 1 when no output is kept under the handle for this
tenant (expired, never issued, or another tenant's: all read the same) or the store failed,
2 for usage or configuration errors (a negative offset, a bad pattern, a window too wide).
`
