package execution

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

var update = flag.Bool("update", false, "rewrite testdata/keys.txt")

// TestResultKeys pins the result document's keys, nested ones included, in the order a result
// is written (docs/design.md §3.4): every optional key is set, so a key that moves, goes or comes
// shows here. -update rewrites testdata/keys.txt.
func TestResultKeys(t *testing.T) {
	repr, text := "{1, 2}", "abc"
	limit := engine.LimitWall
	res := refuse(terms, failure.ProgramError, "boom")
	res.ValueRepr = &repr
	res.Failure.Traceback = "Traceback"
	res.LimitHit = &limit
	a := outputs.Attachment{Name: "f.txt", Handle: "h_1", ContentType: "text/plain", Size: 3, Location: "inline", Reason: "why", Text: &text}
	res.Attachments = []outputs.Attachment{a}
	res.Artifacts = []outputs.Attachment{a}
	res.ArtifactsOmit = []engine.OmittedFile{{Path: "p", Reason: "r"}}
	res.Unavailable = []string{"x"}
	res.UpstreamProblems = []UpstreamProblem{{Server: "s", Problem: "p"}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func(prefix string)
	walk = func(prefix string) {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				k, _ := dec.Token()
				keys = append(keys, prefix+k.(string))
				walk(prefix + k.(string) + ".")
			}
			dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				n := len(keys)
				walk(prefix + "[].")
				if i > 0 { // the first element names the element's keys
					keys = keys[:n]
				}
			}
			dec.Token()
		}
	}
	walk("")
	got := strings.Join(keys, "\n") + "\n"
	file := filepath.Join("testdata", "keys.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("the result document's keys are not those of %s:\n%s", file, got)
	}
}
