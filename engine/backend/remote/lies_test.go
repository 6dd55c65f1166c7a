//go:build linux

package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/remote"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// lyingToken is the credential of the lying service: token characters only, so that it fits
// an artifact name and a MIME parameter unquoted.
const lyingToken = "lying-service-credential-5e1d"

// lyingService is a sandbox service that echoes the credential it was sent into every string
// of its result, sends stdout and stderr that differ from the previews it claims, invents
// attachments, and hands out handles, locations and reasons that are the caller's to make.
// fail makes the program's failure one more string to echo into. name and ctype, when set,
// replace the artifact's name and content type.
func lyingService(t *testing.T, fail bool, name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok == "" {
			t.Error("no credential came")
		}
		var req remote.StartRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("start request: %v", err)
		}
		stdout := lyingStdout(tok)
		stderr := "err " + tok + "\n"
		art := "art " + tok
		if name == "" {
			name = "report-" + tok + ".txt"
		}
		if ctype == "" {
			ctype = "text/plain; charset=" + tok
		}
		lie := func(s string) *string { return &s }
		out := engine.Outcome{
			Value:      json.RawMessage(`{"k":"` + tok + `","` + tok + `":[1,"` + tok + `"]}`),
			ValueRepr:  lie("repr " + tok),
			Stdout:     "a preview that is a lie " + tok,
			Stderr:     "another lie " + tok,
			StdoutSize: int64(len(stdout)),
			StderrSize: 1_000_000, // more than it sends: the rest was never seen
			Terms:      req.Terms, Isolation: engine.LevelIsolated,
			Guarantees: engine.Guarantees{engine.DimProcessTree: engine.Enforced, engine.Dimension(tok): engine.Enforced},
			Attachments: []outputs.Attachment{
				{Name: "stdout", ContentType: "text/" + tok, Size: 3, Location: "inline", Handle: tok, Reason: tok},
				{Name: "value", ContentType: "application/json", Size: 9, Location: "blob", Handle: "h-" + tok},
				{Name: tok, ContentType: "text/plain", Size: 1, Location: "blob", Handle: tok, Reason: tok},
				{Name: "/etc/shadow", ContentType: "text/plain", Size: 1, Location: "inline", Text: lie(tok)},
			},
			Artifacts: []outputs.Attachment{{Name: name, ContentType: ctype, Size: int64(len(art)),
				Location: "blob", Handle: tok, Reason: tok, Text: lie(art)}},
			ArtifactsOmit: []engine.OmittedFile{{Path: tok + "/secret.txt", Reason: "not collected: " + tok}},
		}
		if fail {
			out.Value, out.ValueRepr = nil, nil
			out.Failure = &engine.Failure{Kind: failure.ProgramError, Message: "ValueError: " + tok, Traceback: "Traceback: " + tok, Executed: true}
		}
		res, err := json.Marshal(remote.ResultFrame{Type: remote.FrameResult, Execution: "x1", Outcome: out})
		if err != nil {
			t.Error(err)
		}
		var b []byte
		b = append(b, accepted...)
		b = append(b, `{"type":"progress","elapsed_seconds":1}`+"\n"...)
		b = remote.AppendData(b, "stdout", []byte(stdout[:len(stdout)/2]))
		b = remote.AppendData(b, "stdout", []byte(stdout[len(stdout)/2:]))
		b = remote.AppendData(b, "stderr", []byte(stderr))
		b = remote.AppendData(b, "artifact:0", []byte(art))
		b = append(append(b, res...), '\n')
		stream(w)(b)
	}
}

// lyingStdout is what the lying service sends of stdout: more than the client keeps (8 KiB
// in these tests), with the credential at both ends, and once across the client's ceiling
// (its first 10 bytes kept).
func lyingStdout(tok string) string {
	head := "BEGIN " + tok + " "
	head += strings.Repeat("a", 8<<10-10-len(head))
	return head + tok + strings.Repeat("a", 12_000) + " " + tok + " END\n"
}

func lyingClient(t *testing.T, h http.HandlerFunc) (*remote.Sandbox, *bytes.Buffer) {
	t.Helper()
	srv := httptest.NewServer(&fake{execute: h})
	t.Cleanup(srv.Close)
	var logs bytes.Buffer
	sb, err := remote.New(&remote.Options{URL: srv.URL, Isolation: engine.LevelIsolated,
		Bearer:         func(context.Context) (string, error) { return lyingToken, nil },
		MaxOutputBytes: 8 << 10, PreviewBytes: 1000, Artifacts: engine.ArtifactPolicy{Collect: true},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb, &logs
}

func runLying(sb *remote.Sandbox) *engine.Outcome {
	return sb.Run(context.Background(), engine.Execution{Program: "6*7",
		Terms: engine.Terms{Limits: engine.Limits{WallSeconds: 30}, Isolation: engine.LevelIsolated}})
}

// TestHostileServiceLies is must show 5's first half (issue 25, finding 7): a service that
// echoes its credential into every string field, lies about the previews and invents
// attachments gives a result with no credential anywhere, previews made from the bytes it
// sent, and only the stdout and stderr attachments, rebuilt by the client.
func TestHostileServiceLies(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "completed", true: "program_error"}[fail], func(t *testing.T) {
			sb, logs := lyingClient(t, lyingService(t, fail, "", ""))
			res := runLying(sb)
			switch {
			case !fail && res.Failure != nil:
				t.Fatalf("failure %s: %s", res.Failure.Kind, res.Failure.Message)
			case fail && (res.Failure == nil || res.Failure.Kind != failure.ProgramError):
				t.Fatalf("failure %+v, want program_error", res.Failure)
			}

			// No credential: in the result document, the bytes kept beside it, the log.
			doc, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			texts := map[string]string{"result": string(doc), "log": logs.String(),
				"stdout bytes": string(res.StdoutData), "stderr bytes": string(res.StderrData)}
			for _, f := range res.ArtifactFiles {
				texts["artifact "+f.Name] = string(f.Data) + f.Name
			}
			for where, text := range texts {
				if strings.Contains(text, lyingToken) {
					t.Errorf("the credential is in the %s: %s", where, text)
				}
			}
			if !strings.Contains(string(doc), "[credential]") {
				t.Errorf("nothing was scrubbed, so nothing was echoed: the test tests nothing: %s", doc)
			}

			// True previews: made from what was sent, within the preview size.
			sent := strings.ReplaceAll(lyingStdout(lyingToken), lyingToken, "[credential]")
			if !strings.HasPrefix(res.Stdout, "BEGIN [credential] aaa") || !strings.HasSuffix(res.Stdout, "aaa [credential] END\n") ||
				!strings.Contains(res.Stdout, "…[elided ") || len(res.Stdout) > 1000 {
				t.Errorf("stdout preview %q is not the head and tail of what was sent", res.Stdout)
			}
			if string(res.StdoutData) != sent[:len(res.StdoutData)] || !strings.HasSuffix(string(res.StdoutData), "aaa[credential]") {
				t.Errorf("stdout kept %d bytes that are not the head of what was sent", len(res.StdoutData))
			}
			if !strings.HasPrefix(res.Stderr, "err [credential]\n…[elided ") || string(res.StderrData) != "err [credential]\n" {
				t.Errorf("stderr preview %q (kept %q): want what was sent, then the unseen rest elided", res.Stderr, res.StderrData)
			}
			if strings.Contains(res.Stdout+res.Stderr, "lie") {
				t.Errorf("a claimed preview was handed on: %q %q", res.Stdout, res.Stderr)
			}

			// Only stdout and stderr, as the client makes them.
			want := []outputs.Attachment{
				{Name: "stdout", ContentType: "text/plain", Size: int64(len(lyingStdout(lyingToken))), Truncated: true, Location: "preview_only"},
				{Name: "stderr", ContentType: "text/plain", Size: 1_000_000, Truncated: true, Location: "preview_only"},
			}
			if got, _ := json.Marshal(res.Attachments); string(got) != string(must(json.Marshal(want))) {
				t.Errorf("attachments %s, want %s", got, must(json.Marshal(want)))
			}

			// The artifact: the service's name and content type, scrubbed; the rest the client's.
			if len(res.Artifacts) != 1 || len(res.ArtifactFiles) != 1 {
				t.Fatalf("artifacts %+v", res.Artifacts)
			}
			a := res.Artifacts[0]
			if a.Name != "report-[credential].txt" || a.ContentType != `text/plain; charset="[credential]"` ||
				a.Handle != "" || a.Reason != "" || a.Location != "inline" || a.Text == nil || *a.Text != "art [credential]" ||
				a.Size != int64(len("art [credential]")) || string(res.ArtifactFiles[0].Data) != "art [credential]" {
				t.Errorf("artifact %s", must(json.Marshal(a)))
			}
			if len(res.ArtifactsOmit) != 1 || res.ArtifactsOmit[0].Path != "[credential]/secret.txt" {
				t.Errorf("omitted %+v", res.ArtifactsOmit)
			}
		})
	}
}

// An artifact whose name no workspace holds, or whose content type is no MIME type, has the
// result withheld whole: the service is lying or broken.
func TestHostileServiceArtifactNames(t *testing.T) {
	for _, c := range []struct{ name, ctype string }{
		{"../escape.txt", ""}, {"/etc/passwd", ""}, {"a//b", ""}, {"a/./b", ""}, {"dir/", ""},
		{"nul\x00byte", ""}, {strings.Repeat("n", 256), ""},
		{"ok.txt", "not a type"}, {"ok.txt", "text"}, {"ok.txt", "text/plain; charset"}, {"ok.txt", "text/plain/x"},
		{"ok.txt", "text/plain\r\nX-Injected: 1"},
	} {
		sb, logs := lyingClient(t, lyingService(t, false, c.name, c.ctype))
		res := runLying(sb)
		if res.Failure == nil || res.Failure.Kind != failure.ProviderError || len(res.Artifacts) != 0 || string(res.Value) != "null" {
			t.Errorf("name %q type %q: %+v, want provider_error and nothing handed on", c.name, c.ctype, res.Failure)
			continue
		}
		if strings.Contains(res.Failure.Message+logs.String(), lyingToken) {
			t.Errorf("name %q type %q: the credential is in %q", c.name, c.ctype, res.Failure.Message)
		}
	}
	// A deep but clean name is one a workspace holds.
	sb, _ := lyingClient(t, lyingService(t, false, "a/b/c-d_e.f [1]/g h.txt", "application/vnd.x+json; q=1"))
	if res := runLying(sb); res.Failure != nil || len(res.Artifacts) != 1 {
		t.Errorf("a clean name was refused: %+v", res.Failure)
	}
}

// slowService sends accepted, then one frame a period, heartbeats while the program "runs"
// and then its stdout a line a data frame, beats+lines frames in all, and the result.
func slowService(t *testing.T, period time.Duration, beats, lines int, silence time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req remote.StartRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("start request: %v", err)
		}
		send := stream(w)
		if !send(accepted) {
			return
		}
		for i := range beats {
			time.Sleep(period)
			if !send([]byte(`{"type":"progress","elapsed_seconds":` + string(must(json.Marshal(i+1))) + "}\n")) {
				return
			}
		}
		var all []byte
		for i := range lines {
			line := []byte(strings.Repeat("x", i) + "\n")
			all = append(all, line...)
			if i > 0 {
				time.Sleep(period)
			}
			if !send(remote.AppendData(nil, "stdout", line)) {
				return
			}
		}
		time.Sleep(silence)
		out := engine.Outcome{Value: json.RawMessage("42"), StdoutSize: int64(len(all)), Terms: req.Terms,
			Isolation: engine.LevelIsolated, Guarantees: engine.Guarantees{},
			Attachments: []outputs.Attachment{}, Artifacts: []outputs.Attachment{}, ArtifactsOmit: []engine.OmittedFile{}}
		send(append(must(json.Marshal(remote.ResultFrame{Type: remote.FrameResult, Execution: "x1", Outcome: out})), '\n'))
	}
}

// TestSlowDeliveryIsNotIdle is must show 5's second half, shortened: with an idle timeout of
// 3 s (for the default 15 s), a service that sends one frame a second for 10 s, heartbeats
// and then its output a data frame at a time, completes; every frame, the data frames after
// the first included, restarts the idle timer. The control, a service silent for 5 s after
// its data, is ended as idle: the timer does run.
func TestSlowDeliveryIsNotIdle(t *testing.T) {
	const idle = 3 * time.Second
	run := func(h http.HandlerFunc) (*engine.Outcome, time.Duration) {
		srv := httptest.NewServer(&fake{execute: h})
		defer srv.Close()
		sb, err := remote.New(&remote.Options{URL: srv.URL, Isolation: engine.LevelIsolated, IdleTimeout: idle})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		start := time.Now()
		res := sb.Run(context.Background(), engine.Execution{Program: "6*7",
			Terms: engine.Terms{Limits: engine.Limits{WallSeconds: 60}, Isolation: engine.LevelIsolated}})
		return res, time.Since(start)
	}

	res, took := run(slowService(t, time.Second, 3, 8, 0))
	if res.Failure != nil {
		t.Fatalf("a live delivery failed after %s: %s: %s", took.Round(time.Millisecond), res.Failure.Kind, res.Failure.Message)
	}
	var want string
	for i := range 8 {
		want += strings.Repeat("x", i) + "\n"
	}
	if string(res.StdoutData) != want || res.Stdout != want {
		t.Errorf("stdout %q (preview %q), want %q", res.StdoutData, res.Stdout, want)
	}
	if took < 3*idle {
		t.Errorf("the delivery took %s, not past the idle timeout several times over: the test proves nothing", took)
	}

	res, took = run(slowService(t, 100*time.Millisecond, 0, 3, 5*time.Second))
	if res.Failure == nil || res.Failure.Kind != failure.ProviderError || !strings.Contains(res.Failure.Message, "sent nothing for 3s") {
		t.Errorf("a service silent for 5 s: %+v after %s, want provider_error for an idle stream", res.Failure, took)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
