package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
)

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("check", checkUsage, stdout, stderr)
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	if fs.NArg() != 0 {
		return exitUsage, usagef("takes no arguments (did you mean --config %s?)", fs.Arg(0))
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	auth := assembly.ProbeAuthentication(ctx, cfg)
	for _, w := range append(commandWarnings(cfg), auth.Warnings()...) {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	name := *configPath
	if name == "" {
		name = "the embedded default config"
	}
	fmt.Fprintf(stdout, "%s is valid: %d profiles, %d upstreams, %d tenants\n", name, len(cfg.Profiles), len(cfg.Upstreams), len(cfg.Tenants))
	auth.WriteText(stdout)
	return exitOK, nil
}

const checkUsage = `Usage: mcp-sandbox check [--config FILE]

Validates a config the way the server does at startup ("publish"): strict YAML (an unknown
key is an error), every profile, upstream, tenant, token and agent, without starting anything
or contacting any upstream. Each problem names its key and line. Exit status 2 when the config
is invalid. An upstream whose command cannot be found is a warning (the server would start,
and report that upstream unavailable): a path is taken against the config's directory, a bare
name is looked up on PATH. It says how each tenant authenticates, and how the server
authenticates to each upstream: for one with oauth, a token is requested from its
authorization server (found, without an issuer, through the upstream's resource metadata; the
token is dropped, never sent anywhere), and a wrong secret or an unreachable server is a
warning that names the problem.
`

// commandWarnings names each upstream whose command this host cannot run as written: a
// path (relative ones are already taken against the config's directory) that is not an
// executable file, or a bare name not on PATH.
func commandWarnings(cfg *assembly.Config) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		cmd := cfg.Upstreams[name].Command
		if len(cmd) == 0 {
			continue
		}
		prog := cmd[0]
		if !strings.ContainsRune(prog, filepath.Separator) {
			if _, err := exec.LookPath(prog); err != nil {
				out = append(out, fmt.Sprintf("upstreams.%s.command: %q was not found on PATH; that upstream will be unavailable", name, prog))
			}
			continue
		}
		switch st, err := os.Stat(prog); {
		case err != nil:
			out = append(out, fmt.Sprintf("upstreams.%s.command: %s was not found (a relative path is taken against the config's directory); that upstream will be unavailable", name, prog))
		case st.IsDir() || st.Mode().Perm()&0o111 == 0:
			out = append(out, fmt.Sprintf("upstreams.%s.command: %s is not an executable file; that upstream will be unavailable", name, prog))
		}
	}
	return out
}
