package main

import (
	"context"
	"io"
)

// runServe is built by the mcpserver work; until then it says so.
func runServe(_ context.Context, _ []string, _, _ io.Writer) (int, error) {
	return exitFailure, usagef("serve is not built yet")
}
