package assembly

import (
	"strconv"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// NarrowAgent makes the agent's code_execution ask for the limits want names (run's
// --limit), as if its spec stated them, so the program runs under the very narrowing an
// agent's spec gets (agentTerms, then the profile's hard_limits). A value wider than what the
// agent gets now (its spec, its tenant's policy and the profile's hard_limits, narrowed) is
// refused: --limit only narrows.
func NarrowAgent(cfg *Config, tname, aname string, want configs.Limits) error {
	t := cfg.Tenants[tname]
	a := t.Agents[aname]
	ce := *a.CodeExecution
	p, ok := cfg.Profile(profileOf(&ce))
	if !ok {
		return configErrorf("agent %q of tenant %q names profile %q, which is not defined", aname, tname, profileOf(&ce))
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
			return configErrorf("--limit %s=%s would widen this agent's %s of %s (its spec, its tenant's policy and profile %q's hard_limits): --limit only narrows",
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
