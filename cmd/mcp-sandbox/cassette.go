package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

// writeCassette writes rec's cassette of one execution to path.
func writeCassette(path string, rec *cassette.Recorder, program, agentVersion string, res *execution.Result) error {
	var buf bytes.Buffer
	if err := rec.Write(&buf, program, agentVersion, res.Terms, res); err != nil {
		return err
	}
	return writePrivate(path, buf.Bytes())
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("replay", replayUsage, stdout, stderr)
	tenant := fs.String("tenant", "", "tenant whose agent's profile runs the program (default: the only one)")
	agent := fs.String("agent", "", "agent whose code_execution terms apply (default: the tenant's only one)")
	programPath := fs.String("program", "", "run this program FILE instead of the recorded one")
	asJSON := fs.Bool("json", false, "print the comparison as JSON: one object per cassette")
	warnByDefault(fs)
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage, usagef("want exactly one cassette FILE or a DIR of them")
	}
	files, err := cassetteFiles(fs.Arg(0))
	if err != nil {
		return exitUsage, usagef("%v", err)
	}
	var program string
	if *programPath != "" {
		if program, err = readProgram(*programPath); err != nil {
			return exitUsage, usagef("--program: %v", err)
		}
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	tname, aname, err := pickAgent(cfg, *tenant, *agent)
	if err != nil {
		return exitUsage, err
	}
	if cfg.Tenants[tname].Agents[aname].CodeExecution == nil {
		return exitUsage, usagef("agent %q of tenant %q has no code_execution block: it may not run programs", aname, tname)
	}
	// The profile's sandbox and nothing else: no upstream, no ledger, no blob store. Every
	// call is answered from the cassette.
	a, err := assembly.OpenAgent(ctx, cfg, tname, aname, assembly.Replaying, nil)
	if err != nil {
		return exitCode(err), err
	}
	defer a.Close()
	code := exitOK
	enc := json.NewEncoder(stdout)
	for _, f := range files {
		o := replayOne(ctx, a.CodeExecution, tname, f, program)
		if o.Verdict != cassette.Same {
			code = exitFailure
		}
		if *asJSON {
			if err := enc.Encode(o); err != nil {
				return exitFailure, err
			}
			continue
		}
		fmt.Fprintln(stdout, o.Line())
	}
	return code, nil
}

// replayOne runs program (empty: the recorded one) against the cassette in file.
func replayOne(ctx context.Context, spec *execution.Spec, tenant, file, program string) *cassette.Verdict {
	f, err := os.Open(file)
	if err != nil {
		return cassette.UnreadableVerdict(file, err)
	}
	c, err := cassette.Read(io.LimitReader(f, maxCassetteBytes))
	f.Close()
	if err != nil {
		return cassette.UnreadableVerdict(file, err)
	}
	if program == "" {
		program = c.Header.Program
	}
	player := cassette.NewPlayer(c)
	res := execution.Execute(ctx, spec,
		execution.Program{Code: program, Run: budget.RunRef{Tenant: tenant, ID: budget.NewID("command:c_")}, Tape: player},
		// handle.read() on a recorded handle reads what the cassette kept of its result.
		&execution.Options{Render: mcpserver.ModelReads, Blobs: player.Blobs()})
	var failed any
	if res.Failure != nil {
		failed = res.Failure
	}
	return cassette.Judge(file, c, player, res.Value, failed)
}

// maxCassetteBytes bounds a cassette read back.
const maxCassetteBytes = 1 << 30

// cassetteFiles is path, or the *.jsonl files of the directory path, sorted.
func cassetteFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	files, err := filepath.Glob(filepath.Join(path, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no cassette (*.jsonl)", path)
	}
	return files, nil
}

const replayUsage = `Usage: mcp-sandbox replay [--config FILE] [--tenant T] [--agent A] [--program P] [--json] FILE|DIR

Runs the program a cassette recorded ("mcp-sandbox run --record FILE"), or --program's, on the
agent's profile with no upstream started: every binding call is answered from the cassette by
its sequence number. The first call of another tool or with other arguments than the recorded
one, or a call past the cassette's end, fails with replay_diverged (and so does every call
after it). It prints, per cassette: "same" when the program made exactly the recorded calls and
completed with the recorded value; "diverged at N" with the recorded and the actual call;
"different value" with both values. A DIR replays each *.jsonl in it, one line each. --json
prints one object per cassette instead: verdict, divergence {seq, recorded, actual},
recorded_value, actual_value, failure.

Exit status: 0 when every cassette is the same, 1 otherwise, 2 for usage or configuration
errors.
`
