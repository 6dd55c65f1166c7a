package main

import (
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// commandFlags returns a command's flag set with the flags every command but version has
// (--config, --log-format, --log-level, --help). Usage prints usage, then the flags: on
// stdout when --help asked for it (so `mcp-sandbox run --help | less` works), on stderr
// beside a mistake.
func commandFlags(name, usage string, stdout, stderr io.Writer) (*pflag.FlagSet, *string) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config file (default: the embedded default)")
	fs.String("log-format", "text", "log lines on stderr as text (key=value) or json (one object a line)")
	fs.String("log-level", "info", "the least level logged: debug, info, warn or error")
	help := fs.BoolP("help", "h", false, "print this help on standard output")
	fs.Usage = func() {
		w := stderr
		if *help {
			w = stdout
		}
		io.WriteString(w, usage+"\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	return fs, configPath
}

// warnByDefault makes warn the default --log-level of fs, for a command whose result goes to
// stdout and whose stderr carries only warnings and errors unless the flag asks for more.
func warnByDefault(fs *pflag.FlagSet) {
	if f := fs.Lookup("log-level"); f != nil {
		f.DefValue = "warn"
		_ = f.Value.Set("warn")
	}
}

// parseFlags parses args, and sets the default logger as --log-format and --log-level say.
// When answered is true the command returns code and err at once: --help was answered (exit
// 0), or the flags were wrong (exit 2).
func parseFlags(fs *pflag.FlagSet, args []string) (answered bool, code int, err error) {
	switch err := fs.Parse(args); {
	case err == pflag.ErrHelp:
		return true, exitOK, nil
	case err != nil:
		return true, exitUsage, usagef("%v", err)
	}
	if h := fs.Lookup("help"); h != nil && h.Value.String() == "true" {
		fs.Usage()
		return true, exitOK, nil
	}
	if err := setLogger(fs); err != nil {
		return true, exitUsage, err
	}
	return false, exitOK, nil
}

// setLogger makes the default logger the one --log-format and --log-level name, writing to the
// flag set's output (stderr).
func setLogger(fs *pflag.FlagSet) error {
	format, level := fs.Lookup("log-format"), fs.Lookup("log-level")
	if format == nil || level == nil {
		return nil
	}
	h, err := logHandler(fs.Output(), format.Value.String(), level.Value.String())
	if err != nil {
		return err
	}
	slog.SetDefault(slog.New(h))
	return nil
}

// logHandler is the slog handler for a --log-format and --log-level.
func logHandler(w io.Writer, format, level string) (slog.Handler, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level must be debug, info, warn or error, got %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, usagef("--log-format must be text or json, got %q", format)
}
