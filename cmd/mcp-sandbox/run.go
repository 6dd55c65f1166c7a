package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("run", runUsage, stdout, stderr)
	tenant := fs.String("tenant", "", "tenant whose agent runs the program (default: the only one)")
	agent := fs.String("agent", "", "agent whose code_execution terms apply (default: the tenant's only one)")
	limits := fs.StringArray("limit", nil, "narrow one limit for this program, KEY=VALUE, repeatable ("+strings.Join(limitKeys, ", ")+"): as an agent's code_execution.limits would; never wider")
	record := fs.String("record", "", "also write the execution's cassette to FILE: its binding calls, redacted, and its result (mcp-sandbox replay)")
	runName := fs.String("run", "", "the Run the execution belongs to, as run_code's _meta \"mcp-sandbox/run\" names one (default: a Run of its own)")
	warnByDefault(fs) // the result is the JSON on stdout
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage, usagef("want exactly one program: a FILE, or - for standard input")
	}
	defer startGC(os.LookupEnv)() // before the start's allocations reach the default's first goal
	program, err := readProgram(fs.Arg(0))
	if err != nil {
		return exitUsage, usagef("%v", err)
	}
	if *record != "" {
		if err := refuseLink(*record, false); err != nil { // before the program runs, not after
			return exitUsage, usagef("--record: %v", err)
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
	if len(*limits) > 0 {
		want, err := parseLimitFlags(*limits)
		if err != nil {
			return exitUsage, err
		}
		if err := assembly.NarrowAgent(cfg, tname, aname, want); err != nil {
			return exitUsage, err
		}
	}
	run := budget.RunRef{Tenant: tname, ID: budget.NewID("command:c_")}
	if *runName != "" {
		named, ok := execution.NamedRun(tname, *runName)
		if !ok {
			return exitUsage, usagef("--run: a Run name is at most %d bytes", execution.MaxRunNameBytes)
		}
		run = named
	}
	// What serve opens for the same agent, and nothing more: no warm child, no describe probe,
	// no sweeper; the upstreams start when the turn lists them. The program's own child is
	// started first, so it comes up while the ledger opens and records the execution (the
	// program is sent to it only once that record is committed).
	// Its pools learn result shapes in memory only (nil ledger): the ledger is opened after
	// them and closed beside them.
	oa, err := assembly.OpenAgent(ctx, cfg, tname, aname, assembly.OneShot, nil)
	if err != nil {
		return exitCode(err), err
	}
	closeAgent := sync.OnceFunc(oa.Close)
	defer closeAgent()
	a := oa.Agent
	if ce := a.CodeExecution; ce.Refusal == "" {
		if p, ok := ce.Sandbox.(interface{ Prestart(string, engine.Terms) }); ok {
			p.Prestart(tname, ce.Terms)
		}
	}
	st, err := assembly.OpenStorage(ctx, cfg)
	if err != nil {
		return exitCode(err), err
	}
	defer func() {
		// The ledger's close (its write-ahead log checkpointed: fsyncs) and the agent's (the
		// child's tree killed and reaped, its cgroup removed) need nothing of each other, so
		// the command's last milliseconds overlap them.
		closed := make(chan struct{})
		go func() { defer close(closed); st.Close() }()
		closeAgent()
		<-closed
	}()
	// With cassettes.record the execution is kept in the ledger for export, as serve keeps
	// it; --record writes it to a file instead.
	keeper, err := assembly.CassetteKeeper(cfg, st.Ledger)
	if err != nil {
		return exitFailure, err
	}
	var rec *cassette.Recorder
	var tape binding.Tape
	if *record != "" {
		rec = cassette.NewRecorder(assembly.ConfigSecrets(cfg), cfg.CassetteKeptBytes())
		tape = rec
	}
	res := execution.Execute(ctx, a.CodeExecution,
		execution.Program{Code: program, Run: run, AgentVersion: a.Version, Turn: a.Upstreams.Turn,
			Approvals: &approval.Asking{Asker: nobodyToAsk{}}, Tape: tape},
		// returned_bytes is what run_code would hand a model for this result, so the two agree.
		&execution.Options{Ledger: st.Ledger, Blobs: st.Blobs, Render: mcpserver.ModelReads, Cassettes: keeper})
	if *runName == "" {
		// A Run of its own ends with the command; a named one goes on, as a host's does.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := st.Ledger.EndRun(ectx, run); err != nil && !errors.Is(err, budget.ErrNotFound) {
			slog.Warn("run end not recorded", "run", run.ID, "err", err)
		}
		cancel()
	}
	if rec != nil {
		if err := writeCassette(*record, rec, program, a.Version, res); err != nil {
			return exitFailure, fmt.Errorf("--record: %w", err)
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return exitFailure, err
	}
	if res.Failure != nil {
		return exitFailure, nil
	}
	return exitOK, nil
}

// nobodyToAsk is run's approval asker: a command at a shell has no person to put a question
// to while its program waits, so a call that needs approval is refused, saying why.
type nobodyToAsk struct{}

func (nobodyToAsk) CanAsk() (bool, string) {
	return false, "`mcp-sandbox run` has nobody to ask; run the program through an MCP host that can ask its person (elicitation)"
}

func (nobodyToAsk) Ask(context.Context, approval.Question) (approval.Answer, error) {
	return approval.Answer{}, errors.New("mcp-sandbox run has nobody to ask")
}

// maxProgramBytes bounds a program read from a file or stdin.
const maxProgramBytes = 4 << 20

func readProgram(name string) (string, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxProgramBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxProgramBytes {
		return "", fmt.Errorf("the program is over %d bytes", maxProgramBytes)
	}
	return string(b), nil
}

const runUsage = `Usage: mcp-sandbox run [--config FILE] [--tenant T] [--agent A] [--run ID] [--limit KEY=VALUE]... [--record FILE] FILE|-

Runs one Python program exactly as the agent's run_code would, and prints the result JSON on
stdout: value, stdout and stderr previews, failure (with the full traceback), limit_hit,
terms, isolation and guarantees, attachments and artifacts (with handles), unavailable_bindings
and budget. "-" reads the program from standard input.

It resolves the same turn as "mcp-sandbox serve --tenant T --agent A" (each defaulting to the
only one there is): the profile and terms, the tenant's granted upstream tools (TOOLS, aliases,
call_tool) under its policy and the agent's bindings, the binding budget, the run ledger and the
blob store in data_dir. Outputs larger than their preview are kept under handles; print one
with "mcp-sandbox read-output HANDLE". output.preserve: required makes an output that could not
be kept a failure. A call that needs a person's approval is refused (approval_required_in_program):
nobody can be asked from here.

--limit KEY=VALUE (repeatable) narrows one limit for this program only, exactly as the agent's
code_execution.limits would (--limit wall_seconds=5 --limit memory_bytes=64MiB); a value wider
than the agent's terms is refused.

Each run is a Run of its own, so the per-Run budget starts afresh; --run ID names a Run
instead, the one run_code's _meta "mcp-sandbox/run" names by the same ID, so its budget is
shared across runs and with the host. No warm child is started; the tenant's upstream servers
are started just before the program (TOOLS names their tools), and a tenant granted none starts
nothing.

--record FILE also writes the execution's cassette (JSON Lines): the program, each binding
call in order with its arguments redacted as logs show them and its answer, and the result;
no secret the config names appears in it. "mcp-sandbox replay FILE" runs it again offline.

Go's collector is set as serve sets it (see "mcp-sandbox serve --help") unless GOGC or
GOMEMLIMIT is in the environment.

Exit status: 0 when the program completed, 1 when the result carries a failure or a refusal
(the result is still printed), 2 for usage or configuration errors.
`
