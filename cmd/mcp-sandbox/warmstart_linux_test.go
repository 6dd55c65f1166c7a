//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// TestWarmStartPicksTheTemplate: only warm.start: template turns the namespaces backend's
// templates on; auto (the default) and exec keep exec'd children.
func TestWarmStartPicksTheTemplate(t *testing.T) {
	for start, want := range map[string]bool{configs.WarmStartTemplate: true, configs.WarmStartAuto: false, configs.WarmStartExec: false} {
		p := configs.Profile{Warm: configs.Warm{Start: configs.Text(start)}}
		if got := nsOptions(p).Template; got != want {
			t.Errorf("warm.start %s: Template %v, want %v", start, got, want)
		}
	}
	if nsOptions(configs.Profile{}).Template {
		t.Errorf("no warm.start: Template on")
	}
}

// TestWarmStartNote: doctor says a profile's warm children are forked only where it asks for
// templates and the namespaces backend can fork them here.
func TestWarmStartNote(t *testing.T) {
	tpl := configs.Profile{Warm: configs.Warm{Start: configs.Text(configs.WarmStartTemplate)}}
	forks := &engine.Description{Backend: "namespaces", Mechanisms: []string{"pid-namespace", "warm-template-fork"}}
	execs := &engine.Description{Backend: "namespaces", Mechanisms: []string{"pid-namespace"}}
	for _, tc := range []struct {
		p    configs.Profile
		d    *engine.Description
		want string
	}{
		{tpl, forks, "template:"},
		{tpl, execs, "exec: warm.start is template, but this host cannot"},
		{tpl, &engine.Description{Backend: "bwrap"}, "exec: only the namespaces backend"},
		{configs.Profile{}, forks, "exec (warm.start: auto"},
		{configs.Profile{Warm: configs.Warm{Start: configs.Text(configs.WarmStartExec)}}, forks, "exec (warm.start: exec"},
	} {
		if got := warmStartNote(tc.p, tc.d); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v on %+v: %q, want it to start %q", tc.p.Warm.Start, tc.d, got, tc.want)
		}
	}
}
