package main

import (
	"context"
	"io"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
)

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("doctor", doctorUsage, stdout, stderr)
	asJSON := fs.Bool("json", false, "print the descriptions as JSON")
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	r := assembly.Doctor(ctx, cfg)
	if *asJSON {
		r.WriteJSON(stdout)
	} else {
		r.WriteText(stdout)
	}
	if !r.Ready {
		return exitFailure, nil
	}
	return exitOK, nil
}

const doctorUsage = `Usage: mcp-sandbox doctor [--config FILE] [--json]

Lists the local sandbox backends this host offers (and, for each one it does not, why and
what to install), then describes every profile of the config: its backend, the isolation
level it reached, each of the ten guarantees graded enforced, unverified or unavailable, the
mechanisms in use, and any problem. It runs a fixed probe in each sandbox and never a program.
Then it names the run ledger and the blob store in use (a DSN by its reference, env:NAME or
file:PATH, never its text) and, for PostgreSQL, whether the server answers. Last come the
quotas in force, the server's and each tenant's: programs running at once (and how long one
waits for a slot), sessions, and bytes kept in the blob store. Exit status 1 when a profile or
a store is not ready. Stdio upstream servers are listed as contained (sandbox: PROFILE) or
unconfined.
`
