package main

import (
	"fmt"
	"os"

	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
)

func main() {
	fmt.Fprintf(os.Stderr, "mcp-sandbox-init: this is mcp-sandbox's init helper; the server starts it itself (%s), and it takes no command of its own\n", launch.Command)
	os.Exit(2)
}
