package main

import (
	"io"

	"github.com/spf13/pflag"
)

// commandFlags returns a command's flag set with the --config flag every command but version
// has; --help prints usage, then the flags.
func commandFlags(name, usage string, stderr io.Writer) (*pflag.FlagSet, *string) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config file (default: the embedded default)")
	fs.Usage = func() {
		io.WriteString(stderr, usage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, configPath
}

// parseFlags parses args. When answered is true the command returns code and err at once:
// --help was answered (exit 0), or the flags were wrong (exit 2).
func parseFlags(fs *pflag.FlagSet, args []string) (answered bool, code int, err error) {
	switch err := fs.Parse(args); {
	case err == pflag.ErrHelp:
		return true, exitOK, nil
	case err != nil:
		return true, exitUsage, usagef("%v", err)
	}
	return false, exitOK, nil
}
