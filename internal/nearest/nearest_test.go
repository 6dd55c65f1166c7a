package nearest

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	known := []string{"profiles", "tenants", "upstreams", "data_dir"}
	for _, tc := range []struct {
		s, want string
		ok      bool
	}{
		{"profile", "profiles", true},         // one edit
		{"Tenants", "tenants", true},          // case is not an edit
		{"upstrem", "upstreams", true},        // two edits
		{"datadir", "data_dir", true},         // one edit
		{"tenxxxxs", "", false},               // four edits
		{"ledger", "", false},                 // nothing near
		{"profiles", "profiles", true},        // the name itself
		{strings.Repeat("p", 201), "", false}, // too long to compare
	} {
		got, ok := Name(tc.s, known)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Name(%q) = %q, %v; want %q, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
	// The first of two at the same distance.
	if got, _ := Name("ab", []string{"ac", "ad"}); got != "ac" {
		t.Errorf("a tie went to %q, want the first", got)
	}
	if got, ok := Name("x", []string{strings.Repeat("x", 201)}); ok {
		t.Errorf("a known name over the bound was compared: %q", got)
	}
}
