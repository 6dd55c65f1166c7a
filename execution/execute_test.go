package execution

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// TestMain fails the package when a goroutine outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSandbox answers from a function; it never starts a process.
type fakeSandbox func(ex engine.Execution) *engine.Outcome

func (f fakeSandbox) Run(_ context.Context, ex engine.Execution) *engine.Outcome { return f(ex) }
func (f fakeSandbox) Describe(context.Context) *engine.Description {
	return &engine.Description{Ready: true}
}

var terms = engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone, Isolation: engine.LevelProcess}

// printed is a completed result whose stdout (size bytes of "x\n" lines) is larger than its
// preview, and which collected one artifact named artifact.
func printed(size int, artifact string) fakeSandbox {
	return func(ex engine.Execution) *engine.Outcome {
		r := engine.Refuse(ex.Terms, "", "")
		r.Failure = nil
		r.StdoutData = []byte(strings.Repeat("x\n", size/2))
		r.StdoutSize = int64(len(r.StdoutData))
		r.Attachments = []outputs.Attachment{
			{Name: "stdout", ContentType: "text/plain", Size: r.StdoutSize, Truncated: true, Location: "preview_only"},
			{Name: "stderr", ContentType: "text/plain", Location: "inline"},
		}
		r.Artifacts = []outputs.Attachment{{Name: artifact, ContentType: "text/plain", Size: 3, Location: "preview_only"}}
		r.ArtifactFiles = []engine.ArtifactFile{{Name: artifact, Data: []byte("abc")}}
		return r
	}
}

func stores(t *testing.T) (budget.Ledger, outputs.BlobStore) {
	t.Helper()
	led, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	blobs, err := outputs.OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return led, blobs
}

// A refusal is the result at once: nothing recorded, no turn resolved, nothing run.
func TestRefusalRunsNothing(t *testing.T) {
	led, blobs := stores(t)
	ran, resolved := false, false
	spec := &Spec{Sandbox: fakeSandbox(func(engine.Execution) *engine.Outcome { ran = true; return nil }), Terms: terms, Refusal: "no network here"}
	run := budget.RunRef{Tenant: "t", ID: "named:r"}
	res := Execute(context.Background(), spec, Program{Code: "1", Run: run,
		Turn: func(context.Context) *upstream.Turn { resolved = true; return nil }}, &Options{Ledger: led, Blobs: blobs})
	if res.Failure == nil || res.Failure.Kind != failure.NetworkUnavailable || res.Failure.Message != "no network here" || res.Failure.Executed {
		t.Errorf("failure %+v", res.Failure)
	}
	if ran || resolved {
		t.Errorf("a refused program ran (%v) or resolved its turn (%v)", ran, resolved)
	}
	if err := led.EndRun(context.Background(), run); err == nil {
		t.Errorf("the refused execution left a Run in the ledger")
	}
}

// Outputs larger than their preview are kept under handles and charged as preserved; without a
// store they are preview_only, which preserve: required makes a failure.
func TestOutputsKept(t *testing.T) {
	ctx := context.Background()
	led, blobs := stores(t)
	run := budget.RunRef{Tenant: "t", ID: "named:kept"}
	spec := &Spec{Sandbox: printed(1000, "report.txt"), Terms: terms, PreserveRequired: true}
	res := Execute(ctx, spec, Program{Code: "1", Run: run}, &Options{Ledger: led, Blobs: blobs})
	if res.Failure != nil {
		t.Fatalf("failure %+v", res.Failure)
	}
	out, art := res.Attachments[0], res.Artifacts[0]
	if out.Location != "blob" || out.Handle == "" || art.Location != "blob" || art.Handle == "" || res.Attachments[1].Location != "inline" {
		t.Fatalf("attachments %+v, artifacts %+v", res.Attachments, res.Artifacts)
	}
	if got := res.Budget.Execution.PreservedBytes; got != 1003 || res.Budget.Run != res.Budget.Execution {
		t.Errorf("budget %+v, want 1003 bytes preserved in this execution and its Run", res.Budget)
	}
	w, err := outputs.BlobLines(ctx, blobs, "t", outputs.Handle(art.Handle), 0, 1)
	if err != nil || w.Text != "abc" {
		t.Errorf("the artifact's blob reads %q, %v", w.Text, err)
	}

	for _, required := range []bool{false, true} {
		spec.PreserveRequired = required
		res := Execute(ctx, spec, Program{Code: "1", Run: run}, &Options{Ledger: led})
		if res.Attachments[0].Location != "preview_only" || res.Attachments[0].Handle != "" {
			t.Errorf("no store: stdout %+v", res.Attachments[0])
		}
		switch {
		case !required && res.Failure != nil:
			t.Errorf("preserve when_available: failure %+v", res.Failure)
		case required && (res.Failure == nil || res.Failure.Kind != failure.OutputNotPreserved || !res.Failure.Executed):
			t.Errorf("preserve required without a store: failure %+v", res.Failure)
		}
	}
}

// A Put the store refuses (an artifact name over its 1 KiB label) is output_not_preserved
// under preserve: required, with the store there.
func TestUnkeptArtifactFails(t *testing.T) {
	led, blobs := stores(t)
	long := strings.Repeat("d/", 600) + "f.txt"
	spec := &Spec{Sandbox: printed(10, long), Terms: terms, PreserveRequired: true}
	res := Execute(context.Background(), spec, Program{Code: "1", Run: budget.RunRef{Tenant: "t", ID: "named:u"}}, &Options{Ledger: led, Blobs: blobs})
	if res.Failure == nil || res.Failure.Kind != failure.OutputNotPreserved || !strings.Contains(res.Failure.Message, long) {
		t.Fatalf("failure %+v", res.Failure)
	}
	b, _ := json.Marshal(res.Artifacts)
	if res.Artifacts[0].Location != "preview_only" {
		t.Errorf("artifacts %s", b)
	}
}

func TestNamedRun(t *testing.T) {
	if r, ok := NamedRun("t", "r1"); !ok || r != (budget.RunRef{Tenant: "t", ID: "named:r1"}) {
		t.Errorf("NamedRun = %+v, %v", r, ok)
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxRunNameBytes+1)} {
		if _, ok := NamedRun("t", bad); ok {
			t.Errorf("NamedRun accepted a name of %d bytes", len(bad))
		}
	}
}
