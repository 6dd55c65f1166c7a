package main

import (
	"context"
	"fmt"
	"io"
)

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("check", checkUsage, stderr)
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
	name := *configPath
	if name == "" {
		name = "the embedded default config"
	}
	fmt.Fprintf(stdout, "%s is valid: %d profiles, %d upstreams, %d tenants\n", name, len(cfg.Profiles), len(cfg.Upstreams), len(cfg.Tenants))
	return exitOK, nil
}

const checkUsage = `Usage: mcp-sandbox check [--config FILE]

Validates a config the way the server does at startup ("publish"): strict YAML (an unknown
key is an error), every profile, upstream, tenant, token and agent, without starting anything
or contacting any upstream. Each problem names its key and line. Exit status 2 when the config
is invalid.
`
