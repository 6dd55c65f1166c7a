package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/nearest"
)

// limitKeys are the limits `run --limit KEY=VALUE` narrows: every one an agent's
// code_execution.limits may ask for.
var limitKeys = []string{"cpu_seconds", "wall_seconds", "memory_bytes", "file_size_bytes", "process_count"}

// parseLimitFlags reads `--limit KEY=VALUE` values into limits as an agent's spec states
// them (a later repeat of a key wins).
func parseLimitFlags(flags []string) (configs.Limits, error) {
	var l configs.Limits
	for _, f := range flags {
		key, value, ok := strings.Cut(f, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || value == "" {
			return l, usagef("--limit %q: want KEY=VALUE, KEY one of %s", f, strings.Join(limitKeys, ", "))
		}
		bad := func(want string) error { return usagef("--limit %s=%s: want %s", key, value, want) }
		switch key {
		case "cpu_seconds", "wall_seconds":
			s, err := strconv.ParseFloat(value, 64)
			if err != nil || !(s > 0) || s > 1e9 {
				return l, bad("a positive number of seconds")
			}
			if key == "cpu_seconds" {
				l.CPUSeconds = &s
			} else {
				l.WallSeconds = &s
			}
		case "memory_bytes", "file_size_bytes":
			b, err := configs.ParseByteSize(value)
			if err != nil || b <= 0 {
				return l, bad("a positive size such as 64MiB")
			}
			if key == "memory_bytes" {
				l.MemoryBytes = &b
			} else {
				l.FileSizeBytes = &b
			}
		case "process_count":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 {
				return l, bad("a whole number of at least 1")
			}
			l.ProcessCount = &n
		default:
			msg := fmt.Sprintf("--limit %s: unknown limit (limits: %s)", key, strings.Join(limitKeys, ", "))
			if near, ok := nearest.Name(key, limitKeys); ok {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			return l, usagef("%s", msg)
		}
	}
	return l, nil
}
