package sandboxtest

import (
	"os"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
)

// Main is a backend test binary's TestMain: it is the init helper when the backend re-executes
// the binary as one (launch.MaybeMain), moves the tests into a pid namespace of their own where
// it can (gate.Main), and runs them.
func Main(m *testing.M) {
	launch.MaybeMain()
	gate.Main()
	os.Exit(m.Run())
}
