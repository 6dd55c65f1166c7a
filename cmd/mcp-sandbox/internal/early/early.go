package early

import "os"

// Version is the build's version: "dev" unless the linker sets it (see the package doc).
var Version = "dev"

// Line is what `mcp-sandbox version` prints.
func Line() string { return "mcp-sandbox " + Version + "\n" }

func init() {
	if len(os.Args) != 2 {
		return
	}
	switch os.Args[1] {
	case "--version", "-V", "version":
		// As main's version command does: a failed write to stdout does not change the
		// exit status.
		os.Stdout.WriteString(Line())
		os.Exit(0)
	}
}
