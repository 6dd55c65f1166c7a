package failure

import (
	"slices"
	"testing"
)

// The golden lists: kinds are permanent API (hosts, models and programs branch on them). This
// test fails when a kind is renamed or removed; a new kind is added here and in docs/design.md §3.6.
var (
	goldenResultKinds = []string{"program_error", "limit_exceeded", "timeout", "cancelled",
		"value_not_serializable", "isolation_unavailable", "network_unavailable",
		"backend_unavailable", "capacity_exceeded", "provider_error", "protocol_violation", "output_not_preserved",
		"internal", "config_invalid"}
	goldenCallKinds = []string{"unavailable", "denied", "approval_required_in_program",
		"excluded_builtin", "invalid_arguments", "argument_too_large", "budget_exceeded",
		"binding_result_too_large", "binding_result_not_paged", "tool_error", "upstream_error",
		"timeout", "cancelled", "invalid_result", "replay_diverged"}
)

func strs(ks []Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

func TestGoldenKinds(t *testing.T) {
	if got := strs(ResultKinds()); !slices.Equal(got, goldenResultKinds) {
		t.Errorf("ResultKinds = %q\nwant        %q", got, goldenResultKinds)
	}
	if got := strs(CallKinds()); !slices.Equal(got, goldenCallKinds) {
		t.Errorf("CallKinds = %q\nwant      %q", got, goldenCallKinds)
	}
	for _, k := range CallKinds() {
		if !k.CallKind() {
			t.Errorf("%s is in CallKinds but CallKind() is false", k)
		}
	}
	for _, k := range ResultKinds() {
		if k.CallKind() != slices.Contains(CallKinds(), k) {
			t.Errorf("%s: CallKind() disagrees with CallKinds", k)
		}
	}
}
