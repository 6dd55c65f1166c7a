package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("run", runUsage, stderr)
	tenant := fs.String("tenant", "", "tenant whose agent runs the program (default: the only one)")
	agent := fs.String("agent", "", "agent whose code_execution terms apply (default: the only one)")
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage, usagef("want exactly one program: a FILE, or - for standard input")
	}
	program, err := readProgram(fs.Arg(0))
	if err != nil {
		return exitUsage, usagef("%v", err)
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	tname, aname, err := pickAgent(cfg, *tenant, *agent)
	if err != nil {
		return exitUsage, err
	}
	t := cfg.Tenants[tname]
	ce := t.Agents[aname].CodeExecution
	if ce == nil {
		return exitUsage, usagef("agent %q of tenant %q has no code_execution block: it may not run programs", aname, tname)
	}
	profileName := ce.Profile
	if profileName == "" {
		profileName = configs.DefaultProfileName
	}
	profile, ok := cfg.Profile(profileName)
	if !ok {
		return exitUsage, usagef("agent %q names profile %q, which is not defined", aname, profileName)
	}
	terms, refusal := agentTerms(t, ce)
	var res *engine.Result
	if refusal != "" {
		res = engine.Refuse(terms, failure.NetworkUnavailable, refusal)
	} else {
		runner, err := openProfile(ctx, profileName, profile, openOptions{cacheDir: dataDir(cfg)})
		if err != nil {
			kind, reason := openRefusal(err)
			// No Runner to narrow the terms: report them under the profile's hard limits,
			// as serve does for an unavailable profile.
			terms.Limits = engineLimits(profile.HardLimits, engine.DefaultLimits).Narrow(terms.Limits)
			res = engine.Refuse(terms, kind, reason)
		} else {
			defer runner.Close()
			res = runner.Run(ctx, engine.Execution{Program: program, Terms: terms})
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

const runUsage = `Usage: mcp-sandbox run [--config FILE] [--tenant T] [--agent A] FILE|-

Runs one Python program in the agent's sandbox and prints the result JSON on stdout: value,
stdout and stderr previews, failure (with the full traceback), limit_hit, terms, isolation and
guarantees. "-" reads the program from standard input.

Exit status: 0 when the program completed, 1 when the result carries a failure or a refusal
(the result is still printed), 2 for usage or configuration errors.
`
