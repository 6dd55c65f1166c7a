package configs

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// doc joins lines into a YAML document, so that line i of a test case is lines[i-1].
func doc(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// problemsOf returns the rendered problems of err, checking it is a ConfigInvalid failure
// carrying Problems.
func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	if k := failure.KindOf(err); k != failure.ConfigInvalid {
		t.Fatalf("error kind = %s, want %s: %v", k, failure.ConfigInvalid, err)
	}
	var ps Problems
	if !errors.As(err, &ps) {
		return []string{"<not Problems> " + err.Error()}
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// problemCase is a config and the problems Parse reports for it, in order.
type problemCase struct {
	name string
	data []byte
	want []string
}

// checkProblems parses each case's data as file and compares the problems with its want.
func checkProblems(t *testing.T, file string, tests []problemCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data, file)
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
