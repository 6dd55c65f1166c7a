package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// TestRefusals: the shared refusals say what they refuse, and a sandbox that could not be
// opened refuses every run with its opening's kind (backend_unavailable for an error of no
// kind) and message, running nothing.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		network      Network
		allow, rules bool
		want         string
	}{
		{NetworkUnrestricted, false, true, "allow_network: false"},
		{NetworkRules, true, false, "no network rules"},
		{NetworkUnrestricted, true, false, ""},
		{NetworkRules, false, true, ""},
		{NetworkNone, false, false, ""},
	} {
		got := NetworkRefusal(c.network, c.allow, c.rules)
		if c.want == "" && got != "" || c.want != "" && (!strings.Contains(got, c.want) || !strings.HasSuffix(got, "nothing ran")) {
			t.Errorf("NetworkRefusal(%s, %v, %v) = %q, want one saying %q", c.network, c.allow, c.rules, got, c.want)
		}
	}
	for _, c := range []struct {
		err     error
		kind    failure.Kind
		message string
	}{
		{errors.New("no such file"), failure.BackendUnavailable, "no such file"},
		{failure.New(failure.IsolationUnavailable, "no user namespaces"), failure.IsolationUnavailable, "no user namespaces"},
	} {
		u := NewUnopened(c.err)
		res := u.Run(context.Background(), Execution{Terms: Terms{Network: NetworkNone}})
		if res.Failure == nil || res.Failure.Kind != c.kind || res.Failure.Executed || res.Failure.Message != c.message+"; nothing ran" {
			t.Errorf("%v: %+v, want a %s refusal saying %q", c.err, res.Failure, c.kind, c.message)
		}
		if u.Unavailable() != c.message || u.Describe(context.Background()).Problems[0] != c.message {
			t.Errorf("%v: unavailable %q, want %q", c.err, u.Unavailable(), c.message)
		}
	}
}
