//go:build linux

package assembly

import (
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// TestWarmStartPicksTheTemplate: auto (the default) and template turn the namespaces
// backend's templates on, where the host allows them; exec forbids them.
func TestWarmStartPicksTheTemplate(t *testing.T) {
	for start, want := range map[string]bool{configs.WarmStartTemplate: true, configs.WarmStartAuto: true, configs.WarmStartExec: false} {
		p := configs.Profile{Warm: configs.Warm{Start: configs.Text(start)}}
		if got := testEnv.nsOptions(p).Template; got != want {
			t.Errorf("warm.start %s: Template %v, want %v", start, got, want)
		}
	}
	if !testEnv.nsOptions(configs.Profile{}).Template {
		t.Errorf("no warm.start: Template off")
	}
}

// TestWarmStartNote: doctor says a profile's warm children are forked where it does not forbid
// templates and the namespaces backend can fork them here, and otherwise why not.
func TestWarmStartNote(t *testing.T) {
	tpl := configs.Profile{Warm: configs.Warm{Start: configs.Text(configs.WarmStartTemplate)}}
	forks := &engine.Description{Backend: "namespaces", Mechanisms: []string{"pid-namespace", "warm-template-fork"}}
	execs := &engine.Description{Backend: "namespaces", Mechanisms: []string{"pid-namespace"}}
	for _, tc := range []struct {
		p    configs.Profile
		d    *engine.Description
		want string
	}{
		{tpl, forks, "template (warm.start: template):"},
		{tpl, execs, "exec (warm.start: template): this host cannot fork from templates: root has no range"},
		{tpl, &engine.Description{Backend: "bwrap"}, "exec (warm.start: template): only the namespaces backend"},
		{configs.Profile{}, forks, "template (warm.start: auto):"},
		{configs.Profile{}, execs, "exec (warm.start: auto): this host cannot fork from templates: root has no range"},
		{configs.Profile{Warm: configs.Warm{Start: configs.Text(configs.WarmStartExec)}}, forks, "exec (warm.start: exec forbids"},
	} {
		if got := warmStartNote(tc.p, tc.d, func() string { return "root has no range" }); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v on %+v: %q, want it to start %q", tc.p.Warm.Start, tc.d, got, tc.want)
		}
	}
}
