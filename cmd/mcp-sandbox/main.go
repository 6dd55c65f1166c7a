package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/jobobject"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/nearest"
)

// exit statuses
const (
	exitOK      = 0
	exitFailure = 1 // the result carries a failure or refusal, or a profile is not ready
	exitUsage   = 2 // usage or configuration errors
)

// usageError is a mistake in how the command was called: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitCode is exitUsage for a usage or config error, exitFailure for anything else.
func exitCode(err error) int {
	if isUsage(err) {
		return exitUsage
	}
	return exitFailure
}

// isUsage says whether err is a mistake in how the command was called or in its config.
func isUsage(err error) bool {
	var ue *usageError
	var ce *assembly.ConfigError
	return errors.As(err, &ue) || errors.As(err, &ce)
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error)
}

func commands() []command {
	return []command{
		{"serve", "serve run_code to an MCP host over stdio or streamable HTTP", runServe},
		{"run", "run one program as run_code would and print its result JSON", runRun},
		{"replay", "run a recorded program against its cassette, with no upstream started", runReplay},
		{"export", "write the cassette of an execution a server recorded in the ledger", runExport},
		{"read-output", "print an output kept under a handle (read_tool_output at a shell)", runReadOutput},
		{"approvals", "list the calls waiting for a person's approval, and approve or deny them", runApprovals},
		{"programs", "save, list, show and delete the programs a tenant's agents are offered as tools", runPrograms},
		{"doctor", "list the sandbox backends this machine offers and describe each profile", runDoctor},
		{"check", "validate a config file without running anything", runCheck},
		{"image", "build the container backend's image (or the Kubernetes images) from this machine's files", runImage},
		{"sandbox-service", "serve executions to remote backends of MCP servers elsewhere", runSandboxService},
		{"version", "print the version", runVersion},
	}
}

func main() {
	launch.MaybeMain()
	maybeJobObjectChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// The jobobject backend's probe runs this binary as its hostile children (a busy loop, a
// tree, an allocation, more processes than allowed): main dispatches them first, before
// anything else (a no-op off Windows, where nothing runs the binary so).
func maybeJobObjectChild() {
	if len(os.Args) > 1 && os.Args[1] == jobobject.ChildArg {
		os.Exit(jobobject.ChildMain(os.Args[2:], os.Stdout))
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if len(args) == 0 {
		printUsage(stderr) // a mistake: usage goes beside it, on stderr
		return exitUsage
	}
	if args[0] == "help" && len(args) == 2 { // help COMMAND is COMMAND --help
		args = []string{args[1], "--help"}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stdout) // asked for: stdout, so it pipes
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-V" {
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		code, err := c.run(ctx, args[1:], stdout, stderr)
		if err != nil {
			if isUsage(err) {
				fmt.Fprintf(stderr, "mcp-sandbox %s: %v\n", c.name, err)
				return exitUsage
			}
			fmt.Fprintf(stderr, "mcp-sandbox %s: %v\n", c.name, err)
			if code == exitOK {
				code = exitFailure
			}
		}
		return code
	}
	fmt.Fprintf(stderr, "mcp-sandbox: unknown command %q", args[0])
	known := []string{"--help", "--version"}
	for _, c := range commands() {
		known = append(known, c.name)
	}
	if near, ok := nearest.Name(args[0], known); ok {
		fmt.Fprintf(stderr, "; did you mean %q?", near)
	}
	fmt.Fprint(stderr, "\n\n")
	printUsage(stderr)
	return exitUsage
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: mcp-sandbox <command> [flags]
       mcp-sandbox --version

mcp-sandbox runs Python programs that a model writes, contained in a separate process,
and serves that as the MCP tool run_code.

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-15s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Without --config every command uses the embedded default configuration: tenant "local",
agent "default", profile "default" (the strongest local backend reaching the process level),
no upstream servers.

Examples:
  mcp-sandbox serve                          # stdio, for Claude Desktop and other local hosts
  echo 'print("hi"); 6*7' | mcp-sandbox run -  # one program, result JSON on stdout
  mcp-sandbox read-output h_…                # more of an output a result kept under a handle
  mcp-sandbox approvals list --config deploy.yaml  # calls waiting for a person's approval
  mcp-sandbox doctor                         # what this machine can contain, per profile
  mcp-sandbox check --config deploy.yaml     # validate a config
  mcp-sandbox image build                    # the container backend's image, from this host's Python
  mcp-sandbox sandbox-service --listen 127.0.0.1:8443  # run programs for MCP servers elsewhere

Run "mcp-sandbox <command> --help" (or "mcp-sandbox help <command>") for the flags of a command.
`)
}

func runVersion(_ context.Context, args []string, stdout, _ io.Writer) (int, error) {
	if len(args) > 0 {
		return exitUsage, usagef("takes no arguments")
	}
	fmt.Fprint(stdout, early.Line()) // what early prints when these are the only arguments
	return exitOK, nil
}
