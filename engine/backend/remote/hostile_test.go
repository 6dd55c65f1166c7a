//go:build linux

package remote_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/remote"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// The hostile-stream suite: a fake service on loopback does one hostile thing each, and the
// client must classify it within its deadline plus one second, allocate less than one frame
// ceiling plus 2 MiB doing so, and leave no goroutine behind.

const (
	hostileFrame = 1 << 20 // the client's frame ceiling in this suite
	hostileWall  = 2.0     // seconds
	hostileSlack = time.Second
	hostileToken = "hostile-suite-credential-7f3a"
)

// fake is a scripted sandbox service.
type fake struct {
	describe func(w http.ResponseWriter, r *http.Request) // nil: an honest, ready, isolated one
	execute  func(w http.ResponseWriter, r *http.Request) // POST /v2/executions
	// seen counts requests by "METHOD path".
	mu   sync.Mutex
	seen map[string]int
	auth []string
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	f.seen[r.Method+" "+r.URL.Path]++
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	switch {
	case r.URL.Path == remote.PathDescribe && f.describe != nil:
		f.describe(w, r)
	case r.URL.Path == remote.PathDescribe:
		honestDescribe(w, engine.LevelIsolated)
	case r.URL.Path == remote.PathExecutions:
		f.execute(w, r)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *fake) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

func honestDescribe(w http.ResponseWriter, level engine.Level) {
	g := engine.Guarantees{}
	for _, d := range engine.Dimensions {
		g[d] = engine.Enforced
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(remote.DescribeAnswer{Protocol: remote.Version, Description: engine.Description{
		Backend: "fake", Ready: true, Isolation: level, Guarantees: g, Mechanisms: []string{}, Problems: []string{},
		LimitCeiling: engine.DefaultLimits}})
}

// stream starts a 200 NDJSON answer and returns a function writing raw bytes, flushed. The
// fakes build what they send before the measurement starts, so that what is measured is the
// client.
func stream(w http.ResponseWriter) func(b []byte) bool {
	w.Header().Set("Content-Type", remote.ContentType)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	return func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
}

var accepted = []byte(`{"type":"accepted","execution":"x1"}` + "\n")

func cat(parts ...string) []byte { return []byte(strings.Join(parts, "")) }

func data(stream, s string) string {
	return `{"type":"data","stream":"` + stream + `","data":"` + base64.StdEncoding.EncodeToString([]byte(s)) + `"}` + "\n"
}

// resultFrame is a result frame for execution id with value 42 under the terms the client
// sends (read from the request), at isolation level.
func resultFrame(t *testing.T, r *http.Request, id string, level engine.Level, stdout string) []byte {
	var req remote.StartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		t.Errorf("start request: %v", err)
	}
	res := engine.Outcome{Value: json.RawMessage("42"), Stdout: stdout, StdoutSize: int64(len(stdout)), Terms: req.Terms,
		Isolation: level, Guarantees: engine.Guarantees{}, Attachments: []outputs.Attachment{{Name: "stdout", ContentType: "text/plain", Size: int64(len(stdout)), Location: "inline"}},
		Artifacts: []outputs.Attachment{}, ArtifactsOmit: []engine.OmittedFile{}}
	b, _ := json.Marshal(remote.ResultFrame{Type: remote.FrameResult, Execution: id, Outcome: res})
	return append(b, '\n')
}

// hang keeps a hostile answer open until the client goes away.
func hang(r *http.Request) { <-r.Context().Done() }

type hostileCase struct {
	name string
	fake func(t *testing.T, f *fake)
	want failure.Kind // "" for a completed execution
	// executed is the failure's executed flag, when want is set.
	executed bool
	// honest cases are controls: their frames are legitimate, so the memory bound, which is
	// about hostile ones, does not apply.
	honest bool
	// cancelAfter, when set, is when the caller cancels.
	cancelAfter time.Duration
	check       func(t *testing.T, res *engine.Outcome, f *fake)
}

func hostileCases(otherHost *fake, otherURL string) []hostileCase {
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	head := `{"type":"progress","elapsed_seconds":1`
	overCeiling := cat(head, strings.Repeat(" ", hostileFrame+1-len(head)-1), "}\n")
	atCeiling := cat(head, strings.Repeat(" ", hostileFrame-len(head)-1), "}\n")
	empty := bytes.Repeat([]byte("\n"), 100_000)
	beat := []byte(`{"type":"progress","elapsed_seconds":1}` + "\n")
	// beating accepts the execution, then sends a valid heartbeat every d for as long as the
	// client reads them.
	beating := func(d time.Duration) func(t *testing.T, f *fake) {
		return func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				send := stream(w)
				send(accepted)
				for send(beat) {
					time.Sleep(d)
				}
			}
		}
	}
	cancelledOnce := func(t *testing.T, f *fake) {
		if n := f.count("POST /v2/executions/x1/cancel"); n != 1 {
			t.Errorf("%d cancels posted, want 1", n)
		}
	}
	return []hostileCase{
		{name: "an endless line with no newline", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				send := stream(w)
				send(accepted)
				for send(chunk) {
				}
			}
		}},
		{name: "a frame just over the ceiling", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				send := stream(w)
				send(accepted)
				send(overCeiling)
				hang(r)
			}
		}},
		{name: "a frame exactly at the ceiling is read", honest: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				res := resultFrame(t, r, "x1", engine.LevelIsolated, "")
				send := stream(w)
				send(accepted)
				send(atCeiling)
				send(res)
			}
		}},
		{name: "a million empty lines", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				send := stream(w)
				send(accepted)
				for i := 0; i < 10 && send(empty); i++ {
				}
				hang(r)
			}
		}},
		{name: "an endless stream of valid heartbeats", want: failure.Timeout, executed: true, fake: beating(10 * time.Millisecond),
			check: func(t *testing.T, res *engine.Outcome, f *fake) {
				if res.LimitHit == nil || *res.LimitHit != engine.LimitWall {
					t.Errorf("limit_hit %v, want wall_seconds", res.LimitHit)
				}
				cancelledOnce(t, f)
			}},
		{name: "a caller that cancels", want: failure.Cancelled, executed: true, cancelAfter: 300 * time.Millisecond, fake: beating(100 * time.Millisecond),
			check: func(t *testing.T, res *engine.Outcome, f *fake) {
				if !res.Cancelled {
					t.Errorf("cancelled is false")
				}
				cancelledOnce(t, f)
			}},
		{name: "a 200 with HTML", want: failure.ProviderError, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("<html><body>Welcome to the captive portal</body></html>\n"))
			}
		}},
		{name: "a stream cut mid-frame", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				send := stream(w)
				send(cat(string(accepted), `{"type":"progress","elaps`))
				panic(http.ErrAbortHandler) // the connection is cut, not ended
			}
		}},
		{name: "a result frame for another execution", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				res := resultFrame(t, r, "x2", engine.LevelIsolated, "")
				send := stream(w)
				send(cat(string(accepted), string(res)))
			}
		}, check: func(t *testing.T, res *engine.Outcome, _ *fake) {
			if string(res.Value) != "null" {
				t.Errorf("value %s handed on", res.Value)
			}
		}},
		{name: "a frame with unknown fields", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				send := stream(w)
				send(cat(string(accepted), `{"type":"progress","elapsed_seconds":1,"Elapsed_Seconds":2}`+"\n"))
				hang(r)
			}
		}},
		{name: "a redirect to another host", want: failure.ProviderError, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, otherURL+remote.PathExecutions, http.StatusTemporaryRedirect)
			}
		}, check: func(t *testing.T, res *engine.Outcome, f *fake) {
			otherHost.mu.Lock()
			defer otherHost.mu.Unlock()
			if len(otherHost.seen) != 0 {
				t.Errorf("the other host was reached: %v", otherHost.seen)
			}
		}},
		{name: "a describe that lies about its level", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				res := resultFrame(t, r, "x1", engine.LevelProcess, "read /etc/shadow\n")
				send := stream(w)
				send(cat(string(accepted), data("stdout", "read /etc/shadow\n"), string(res)))
			}
		}, check: func(t *testing.T, res *engine.Outcome, _ *fake) {
			if string(res.Value) != "null" || res.Stdout != "" || len(res.StdoutData) != 0 {
				t.Errorf("the output of a program run below its isolation was handed on: value %s stdout %q", res.Value, res.Stdout)
			}
			if !strings.Contains(res.Failure.Message, `"process"`) {
				t.Errorf("message %q does not name the level reached", res.Failure.Message)
			}
		}},
		{name: "a describe below the level: nothing is sent", want: failure.IsolationUnavailable, fake: func(t *testing.T, f *fake) {
			f.describe = func(w http.ResponseWriter, r *http.Request) { honestDescribe(w, engine.LevelProcess) }
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				t.Error("a program was sent to a service that cannot run it")
			}
		}},
		{name: "a 503 is not retried", want: failure.ProviderError, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
			}
		}, check: func(t *testing.T, res *engine.Outcome, f *fake) {
			if n := f.count("POST " + remote.PathExecutions); n != 1 {
				t.Errorf("the execution was sent %d times, want exactly once", n)
			}
		}},
		{name: "a result claiming wider terms", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				res := strings.Replace(string(resultFrame(t, r, "x1", engine.LevelIsolated, "")), `"wall_seconds":2`, `"wall_seconds":3600`, 1)
				stream(w)(cat(string(accepted), res))
			}
		}},
		{name: "a result naming an unknown failure kind", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				res := strings.Replace(string(resultFrame(t, r, "x1", engine.LevelIsolated, "")), `"failure":null`, `"failure":{"kind":"all_fine","message":"m","executed":true}`, 1)
				stream(w)(cat(string(accepted), res))
			}
		}},
		{name: "a refusal claimed after the program wrote", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				res := strings.Replace(string(resultFrame(t, r, "x1", engine.LevelIsolated, "ran anyway\n")), `"failure":null`,
					`"failure":{"kind":"isolation_unavailable","message":"nothing ran","executed":false}`, 1)
				stream(w)(cat(string(accepted), data("stdout", "ran anyway\n"), res))
			}
		}, check: func(t *testing.T, res *engine.Outcome, _ *fake) {
			if res.Stdout != "" || !strings.Contains(res.Failure.Message, "yet the program wrote output") {
				t.Errorf("a refusal after output: stdout %q, message %q", res.Stdout, res.Failure.Message)
			}
		}},
		{name: "a result naming an unknown limit", want: failure.ProviderError, executed: true, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				res := strings.Replace(string(resultFrame(t, r, "x1", engine.LevelIsolated, "")), `"limit_hit":null`, `"limit_hit":"patience"`, 1)
				stream(w)(cat(string(accepted), res))
			}
		}},
		{name: "an echoed credential is scrubbed", want: failure.ProviderError, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"kind":"bad_request","message":"you sent %s"}}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			}
		}},
		{name: "an error frame is a refusal", want: failure.NetworkUnavailable, fake: func(t *testing.T, f *fake) {
			f.execute = func(w http.ResponseWriter, r *http.Request) {
				stream(w)([]byte(`{"type":"error","kind":"network_unavailable","message":"no network here"}` + "\n"))
			}
		}},
	}
}

// TestHostileStreams is must show 2.
func TestHostileStreams(t *testing.T) {
	other := &fake{execute: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }}
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	for _, c := range hostileCases(other, otherSrv.URL) {
		t.Run(c.name, func(t *testing.T) {
			runtime.GC()
			baseline := runtime.NumGoroutine()
			f := &fake{}
			c.fake(t, f)
			srv := httptest.NewServer(f)
			var logs bytes.Buffer
			sb, err := remote.New(&remote.Options{URL: srv.URL, Isolation: engine.LevelIsolated,
				Bearer: func(context.Context) (string, error) { return hostileToken, nil },
				Bounds: remote.Bounds{MaxFrame: hostileFrame}, Slack: hostileSlack, CancelGrace: 250 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancelAfter > 0 {
				stop := time.AfterFunc(c.cancelAfter, cancel)
				defer stop.Stop()
			}
			res := sb.Run(ctx, engine.Execution{Program: "6*7",
				Terms: engine.Terms{Limits: engine.Limits{WallSeconds: hostileWall}, Isolation: engine.LevelIsolated}})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)

			deadline := time.Duration(hostileWall*float64(time.Second)) + hostileSlack
			if elapsed > deadline+time.Second {
				t.Errorf("classified after %s, past the deadline %s plus one second", elapsed, deadline)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > hostileFrame+2<<20 && !c.honest {
				t.Errorf("allocated %d KiB, over one frame ceiling (%d KiB) plus 2 MiB", grew>>10, hostileFrame>>10)
			}
			switch {
			case c.want == "" && res.Failure != nil:
				t.Errorf("failure %s: %s", res.Failure.Kind, res.Failure.Message)
			case c.want != "" && (res.Failure == nil || res.Failure.Kind != c.want):
				t.Errorf("want %s, got %+v", c.want, res.Failure)
			case c.want != "" && res.Failure.Executed != c.executed:
				t.Errorf("executed %v, want %v (%s)", res.Failure.Executed, c.executed, res.Failure.Message)
			}
			if c.check != nil {
				c.check(t, res, f)
			}
			out, _ := json.Marshal(res)
			for where, text := range map[string]string{"result": string(out), "log": logs.String()} {
				if strings.Contains(text, hostileToken) {
					t.Errorf("the credential appears in the %s: %s", where, text)
				}
			}
			if res.Failure != nil {
				t.Logf("%s after %s, %d KiB allocated: %s", res.Failure.Kind, elapsed.Round(time.Millisecond),
					(after.TotalAlloc-before.TotalAlloc)>>10, res.Failure.Message)
			}

			sb.Close()
			srv.Close()
			for wait := time.Now().Add(gate.Scaled(3 * time.Second)); runtime.NumGoroutine() > baseline; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(wait) {
					buf := make([]byte, 1<<16)
					t.Fatalf("%d goroutines, baseline %d:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
				}
			}
		})
	}
}

// Describe is the one request that is retried: twice 503, then an answer.
func TestDescribeRetries(t *testing.T) {
	var n atomic.Int32
	f := &fake{describe: func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		honestDescribe(w, engine.LevelIsolated)
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	sb, err := remote.New(&remote.Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if d := sb.Describe(context.Background()); !d.Ready || d.Isolation != engine.LevelIsolated {
		t.Fatalf("description %+v", d)
	}
	if n.Load() != 3 {
		t.Errorf("described %d times, want 3", n.Load())
	}
}

// A credential over plaintext http is refused unless the host is loopback or
// AllowInsecureHTTP says the network in between is trusted; a URL never carries one.
func TestNewRefusesAnExposedCredential(t *testing.T) {
	bearer := func(context.Context) (string, error) { return "t", nil }
	for _, c := range []struct {
		url      string
		bearer   bool
		insecure bool
		ok       bool
	}{
		{"http://10.0.0.1:8443", true, false, false},
		{"http://10.0.0.1:8443", true, true, true},
		{"http://10.0.0.1:8443", false, false, true},
		{"http://127.0.0.1:8443", true, false, true},
		{"http://[::1]:8443", true, false, true},
		{"http://localhost:8443", true, false, true},
		{"https://sandboxes.internal", true, false, true},
		{"https://user:pass@sandboxes.internal", false, false, false},
		{"https://sandboxes.internal/?token=x", false, false, false},
		{"ftp://sandboxes.internal", false, false, false},
		{"sandboxes.internal:8443", false, false, false},
	} {
		opts := remote.Options{URL: c.url, AllowInsecureHTTP: c.insecure}
		if c.bearer {
			opts.Bearer = bearer
		}
		sb, err := remote.New(&opts)
		if (err == nil) != c.ok {
			t.Errorf("%s bearer=%v insecure=%v: err %v", c.url, c.bearer, c.insecure, err)
		}
		if err != nil && (strings.Contains(err.Error(), "pass") || strings.Contains(err.Error(), "token=x")) {
			t.Errorf("the error quotes the URL: %v", err)
		}
		if sb != nil {
			sb.Close()
		}
	}
}
