package main

import (
	"os"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestMain lets this test binary be the init helper of the sandboxes the in-process tests
// open (trace_test.go), as the built binary is for the rest.
func TestMain(m *testing.M) {
	launch.MaybeMain()
	os.Exit(testkit.Run(m))
}
