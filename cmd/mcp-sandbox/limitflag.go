package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
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

// narrowAgent makes the agent's code_execution ask for the limits flags name, as if its spec
// stated them, so the program runs under the very narrowing an agent's spec gets (agentTerms,
// then the profile's hard_limits). A value wider than what the agent gets now (its spec, its
// tenant's policy and the profile's hard_limits, narrowed) is refused: --limit only narrows.
func narrowAgent(cfg *configs.Config, tname, aname string, flags []string) error {
	want, err := parseLimitFlags(flags)
	if err != nil {
		return err
	}
	t := cfg.Tenants[tname]
	a := t.Agents[aname]
	ce := *a.CodeExecution
	p, ok := cfg.Profile(profileOf(&ce))
	if !ok {
		return usagef("agent %q of tenant %q names profile %q, which is not defined", aname, tname, profileOf(&ce))
	}
	now := engineLimits(ce.Limits, engine.Limits{}).
		Narrow(engineLimits(t.Policy.Limits, engine.Limits{})).
		Narrow(engineLimits(p.HardLimits, engine.Limits{}))
	asked := engineLimits(want, engine.Limits{})
	for _, d := range []struct {
		key       string
		set       bool
		asked, at float64
		text      func(float64) string
	}{
		{"cpu_seconds", want.CPUSeconds != nil, asked.CPUSeconds, now.CPUSeconds, secondsText},
		{"wall_seconds", want.WallSeconds != nil, asked.WallSeconds, now.WallSeconds, secondsText},
		{"memory_bytes", want.MemoryBytes != nil, float64(asked.MemoryBytes), float64(now.MemoryBytes), sizeText},
		{"file_size_bytes", want.FileSizeBytes != nil, float64(asked.FileSizeBytes), float64(now.FileSizeBytes), sizeText},
		{"process_count", want.ProcessCount != nil, float64(asked.ProcessCount), float64(now.ProcessCount), countText},
	} {
		if d.set && d.at > 0 && d.asked > d.at {
			return usagef("--limit %s=%s would widen this agent's %s of %s (its spec, its tenant's policy and profile %q's hard_limits): --limit only narrows",
				d.key, d.text(d.asked), d.key, d.text(d.at), profileOf(&ce))
		}
	}
	if want.CPUSeconds != nil { // the flags' values; the spec's for the rest
		ce.Limits.CPUSeconds = want.CPUSeconds
	}
	if want.WallSeconds != nil {
		ce.Limits.WallSeconds = want.WallSeconds
	}
	if want.MemoryBytes != nil {
		ce.Limits.MemoryBytes = want.MemoryBytes
	}
	if want.FileSizeBytes != nil {
		ce.Limits.FileSizeBytes = want.FileSizeBytes
	}
	if want.ProcessCount != nil {
		ce.Limits.ProcessCount = want.ProcessCount
	}
	a.CodeExecution = &ce
	t.Agents[aname] = a
	return nil
}

func secondsText(s float64) string { return strconv.FormatFloat(s, 'g', -1, 64) + "s" }
func sizeText(b float64) string    { return configs.ByteSize(int64(b)).String() }
func countText(n float64) string   { return strconv.Itoa(int(n)) }
