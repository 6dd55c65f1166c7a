//go:build linux

package namespaces_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

func pyList(xs ...string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func valueMap(t *testing.T, r *engine.Outcome) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := json.Unmarshal(r.Value, &m); err != nil {
		t.Fatalf("value %s: %v", r.Value, err)
	}
	return m
}

func itoa(n int) string { return strconv.Itoa(n) }
