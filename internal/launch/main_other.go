//go:build !linux && !darwin

package launch

import (
	"fmt"
	"os"
)

// MaybeMain runs the helper when os.Args names Command; elsewhere than Linux the helper
// cannot contain anything and says so.
func MaybeMain() {
	if len(os.Args) > 1 && os.Args[1] == Command {
		Main()
	}
}

// Main refuses: the init helper is Linux-only.
func Main() {
	fmt.Fprintln(os.Stderr, "mcp-sandbox-init: the sandbox init helper runs on Linux only")
	os.Exit(ExitSetupFailed)
}

// HasCapability is false where there are no Linux capabilities.
func HasCapability(int) bool { return false }
