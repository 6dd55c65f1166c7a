package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Text is the text a model reads in a tool result: its text blocks, one per line.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Mentions fails t unless text (what, in a message) contains each of want or, when want is
// empty, unless text is empty: what a note or advice must say, or that there is none.
func Mentions(t testing.TB, what, text string, want []string) {
	t.Helper()
	if len(want) == 0 {
		if text != "" {
			t.Fatalf("%s %q, want none", what, text)
		}
		return
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s %q\nlacks %q", what, text, w)
		}
	}
}

// Log keeps what a process writes (its stderr, say) and, made by NewLog, echoes each write
// into the test log. The zero Log keeps without echoing. It may be written concurrently.
type Log struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	buf    strings.Builder
}

// NewLog is a Log that echoes into t's log, each write prefixed with prefix and a colon.
func NewLog(t testing.TB, prefix string) *Log { return &Log{t: t, prefix: prefix} }

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if l.t != nil {
		l.t.Logf("%s: %s", l.prefix, strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// String is what has been written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// WriteConfig writes yaml to config.yaml in a directory of t's own and returns its path.
func WriteConfig(t testing.TB, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
