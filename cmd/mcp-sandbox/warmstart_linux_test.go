//go:build linux

package main

import (
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
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
