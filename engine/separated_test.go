package engine

import (
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
)

// TestSeparated pins the fail-closed check of a forked child's probe: each way a sibling
// could reach another, or a confinement step be missing, refuses the child; an exec'd child
// is not checked.
func TestSeparated(t *testing.T) {
	apart := wire.Probe{PID: 1, ProcPIDs: 1, NoNewPrivs: 1, Seccomp: 2, CapEff: "0000000000000000",
		LandlockRoot: "refused"}
	forked := Facts{Forked: &StartInfo{Kind: StartForked}, Landlock: true}
	if why := separated(apart, forked); why != "" {
		t.Fatalf("a child kept apart was refused: %s", why)
	}
	for _, tc := range []struct {
		name   string
		change func(*wire.Probe)
		want   string
	}{
		{"another process in /proc", func(p *wire.Probe) { p.ProcPIDs = 2 }, "sees 2 processes"},
		{"/proc unreadable", func(p *wire.Probe) { p.ProcPIDs = -1 }, "sees -1 processes"},
		{"not its namespace's pid 1", func(p *wire.Probe) { p.PID = 2 }, "it is pid 2"},
		{"the template's pid namespace", func(p *wire.Probe) { p.PID, p.ProcPIDs = 7, 9 }, "it is pid 7 and sees 9 processes"},
		{"no no_new_privs", func(p *wire.Probe) { p.NoNewPrivs = 0 }, "NoNewPrivs is 0"},
		{"no seccomp filter", func(p *wire.Probe) { p.Seccomp = 0 }, "Seccomp is 0"},
		{"a capability left", func(p *wire.Probe) { p.CapEff = "0000000000200000" }, "effective capabilities"},
		{"status unreadable", func(p *wire.Probe) { p.NoNewPrivs, p.Seccomp, p.CapEff = -1, -1, "" }, "NoNewPrivs is -1"},
		{"no Landlock domain", func(p *wire.Probe) { p.LandlockRoot = "allowed" }, `no Landlock domain: opening / for reading was "allowed"`},
		{"Landlock not told", func(p *wire.Probe) { p.LandlockRoot = "unknown" }, "no Landlock domain"},
		{"a bootstrap without the probe", func(p *wire.Probe) { p.LandlockRoot = "" }, "no Landlock domain"},
	} {
		p := apart
		tc.change(&p)
		if why := separated(p, forked); !strings.Contains(why, tc.want) {
			t.Errorf("%s: %q, want it to say %q", tc.name, why, tc.want)
		}
		if why := separated(p, Facts{}); why != "" {
			t.Errorf("%s: an exec'd child was checked: %s", tc.name, why)
		}
	}
	// A forked child whose facts claim no Landlock (its ruleset left out on purpose) is not
	// asked for a domain; one that claims it is.
	noDomain := apart
	noDomain.LandlockRoot = "allowed"
	if why := separated(noDomain, Facts{Forked: forked.Forked}); why != "" {
		t.Errorf("a forked child without Landlock in its facts was asked for a domain: %s", why)
	}
}
