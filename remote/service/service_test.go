//go:build linux

package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/remote"
	"github.com/mcp-sandbox/mcp-sandbox/remote/service"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// scripted is a LocalSandbox whose executions run a Go function instead of a child: it tests
// the service's side of the protocol exactly. The contract suite runs the real one.
type scripted struct {
	level engine.Level
	run   func(ctx context.Context, ex engine.Execution) *engine.Outcome
	runs  atomic.Int32
}

func (s *scripted) Run(ctx context.Context, ex engine.Execution) *engine.Outcome {
	s.runs.Add(1)
	res := engine.Refuse(s.Terms(ex.Terms), "", "")
	res.Failure, res.Isolation = nil, s.level
	if s.run != nil {
		if r := s.run(ctx, ex); r != nil {
			r.Terms, r.Isolation = res.Terms, s.level
			return r
		}
	}
	res.Value = json.RawMessage("42")
	return res
}

func (s *scripted) Describe(context.Context) *engine.Description {
	return &engine.Description{Backend: "scripted", Ready: true, Isolation: s.level, Guarantees: engine.Guarantees{},
		Mechanisms: []string{}, Problems: []string{}, LimitCeiling: engine.DefaultLimits}
}

func (s *scripted) Terms(t engine.Terms) engine.Terms {
	out := engine.Terms{Limits: engine.DefaultLimits.Narrow(t.Limits), Network: t.Network, Isolation: t.Isolation}
	if out.Network == "" {
		out.Network = engine.NetworkNone
	}
	if out.Isolation == "" {
		out.Isolation = engine.LevelProcess
	}
	return out
}

// tokens: "alice" and "bob" are two principals.
func authenticate(tok string) (string, bool) {
	switch tok {
	case "alice-token":
		return "alice", true
	case "bob-token":
		return "bob", true
	}
	return "", false
}

// scriptedService serves sb on loopback; the ids of accepted executions arrive on the
// channel it returns.
func scriptedService(t *testing.T, sb *scripted, opts service.Options) (*service.Service, string, <-chan string) {
	t.Helper()
	opts.Sandbox = sb
	if opts.Authenticate == nil {
		opts.Authenticate = authenticate
	}
	svc := service.New(&opts)
	ids := make(chan string, 16)
	srv := httptest.NewServer(tap(svc, ids))
	t.Cleanup(srv.Close)
	return svc, srv.URL, ids
}

func as(t testing.TB, url, token string) *remote.Sandbox {
	t.Helper()
	sb, err := remote.New(&remote.Options{URL: url, Bearer: func(context.Context) (string, error) { return token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func post(t *testing.T, url, token, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Every route but /healthz and /readyz needs a token; an execution's routes answer only the
// principal that started it.
func TestServiceAuthenticates(t *testing.T) {
	release := make(chan struct{})
	sb := &scripted{level: engine.LevelIsolated, run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		<-release
		return nil
	}}
	svc, url, ids := scriptedService(t, sb, service.Options{})
	for _, route := range []string{remote.PathDescribe, remote.PathExecutions, remote.PathExecutions + "/x1/results", remote.PathExecutions + "/x1/cancel"} {
		method := http.MethodPost
		if route == remote.PathDescribe {
			method = http.MethodGet
		}
		for _, tok := range []string{"", "mallory-token"} {
			req, _ := http.NewRequest(method, url+route, strings.NewReader("{}"))
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			if svc.Admits(req) {
				t.Errorf("%s %s with token %q: Admits, which the service answers 401", method, route, tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %s, want 401", method, route, tok, resp.Status)
			}
		}
	}
	for _, tok := range []string{"alice-token", "bob-token"} {
		req, _ := http.NewRequest(http.MethodGet, url+remote.PathHealth, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if !svc.Admits(req) {
			t.Errorf("a caller's token (%s) is not admitted", tok)
		}
	}
	for _, route := range []string{remote.PathHealth, remote.PathReady} {
		resp, err := http.Get(url + route)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", route, resp.Status)
		}
	}

	// Alice's execution is not Bob's to answer or cancel.
	done := make(chan *engine.Outcome, 1)
	go func() {
		done <- as(t, url, "alice-token").Run(context.Background(), engine.Execution{Program: "x",
			Progress: func(float64, *outputs.Capture) {}})
	}()
	id := <-ids
	for _, route := range []string{"/results", "/cancel"} {
		resp := post(t, url+remote.PathExecutions+"/"+id+route, "bob-token", `{"type":"result","id":1,"ok":true,"value":1}`)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's %s on alice's execution: %s, want 404", route, resp.Status)
		}
	}
	close(release)
	if res := <-done; res.Failure != nil || string(res.Value) != "42" {
		t.Fatalf("alice's execution: %+v %s", res.Failure, res.Value)
	}
}

// tap passes h's answers through and sends the id of each accepted execution on ids.
func tap(h http.Handler, ids chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&tapWriter{ResponseWriter: w, ids: ids}, r)
	})
}

type tapWriter struct {
	http.ResponseWriter
	ids  chan<- string
	seen bool
}

func (w *tapWriter) Write(b []byte) (int, error) {
	if !w.seen {
		w.seen = true
		var a remote.Accepted
		if json.Unmarshal(bytes.TrimSpace(b), &a) == nil && a.Type == remote.FrameAccepted {
			w.ids <- a.Execution
		}
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush and deadlines.
func (w *tapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A service asked for terms it cannot meet answers an error frame and runs nothing.
func TestServiceRefusesBeforeRunning(t *testing.T) {
	sb := &scripted{level: engine.LevelProcess}
	_, url, _ := scriptedService(t, sb, service.Options{})
	for _, c := range []struct {
		terms string
		kind  failure.Kind
	}{
		{`{"network":"unrestricted"}`, failure.NetworkUnavailable},
		{`{"isolation":"isolated"}`, failure.IsolationUnavailable},
		{`{"network":"wide-open"}`, failure.BackendUnavailable},
		{`{"memory_bytes":1024}`, failure.BackendUnavailable},
	} {
		resp := post(t, url+remote.PathExecutions, "alice-token", `{"protocol":2,"program":"6*7","terms":`+c.terms+`,"tools":[],"calls":false}`)
		var f remote.ErrorFrame
		if err := json.NewDecoder(resp.Body).Decode(&f); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %v", c.terms, resp.Status, err)
		}
		if f.Type != remote.FrameError || failure.Kind(f.Kind) != c.kind {
			t.Errorf("%s: frame %+v, want an error frame of kind %s", c.terms, f, c.kind)
		}
	}
	if n := sb.runs.Load(); n != 0 {
		t.Errorf("%d executions ran", n)
	}
	resp := post(t, url+remote.PathExecutions, "alice-token", `{"protocol":3,"program":"","terms":{},"tools":[],"calls":false}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("protocol 3: %s, want 400", resp.Status)
	}
}

// Binding calls travel back to the caller's ToolCaller, overlapping, and come back in any
// order; a read of a handle goes the same way.
func TestServiceForwardsCalls(t *testing.T) {
	sb := &scripted{level: engine.LevelProcess, run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		var wg sync.WaitGroup
		got := make([]string, 8)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep := ex.Tools.CallTool(ctx, "up__echo", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
				got[i] = string(rep.Value) + string(rep.Kind)
			}()
		}
		wg.Wait()
		rd := ex.Tools.ReadHandle(ctx, "h_1", 3, 4, "ERR")
		res := engine.Refuse(engine.Terms{}, "", "")
		res.Failure = nil
		v, _ := json.Marshal(map[string]any{"calls": got, "read": string(rd.Value), "names": ex.ToolNames, "aliases": ex.Aliases})
		res.Value = v
		return res
	}}
	_, url, _ := scriptedService(t, sb, service.Options{})
	tools := &recorder{}
	var resolved atomic.Int32
	client, err := remote.New(&remote.Options{URL: url, Bearer: func(context.Context) (string, error) {
		resolved.Add(1)
		return "alice-token", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	res := client.Run(context.Background(), engine.Execution{Program: "p", Tools: tools, ToolNames: []string{"up__echo"}, Aliases: []string{"up__echo"}})
	if res.Failure != nil {
		t.Fatalf("%s: %s", res.Failure.Kind, res.Failure.Message)
	}
	var v struct {
		Calls   []string
		Read    string
		Names   []string
		Aliases []string
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	for i, c := range v.Calls {
		if want := fmt.Sprintf(`{"echo":{"i":%d}}`, i); c != want {
			t.Errorf("call %d answered %s, want %s", i, c, want)
		}
	}
	if v.Read != `"h_1 3 4 ERR"` || strings.Join(v.Names, ",") != "up__echo" {
		t.Errorf("read %s, names %v", v.Read, v.Names)
	}
	// The caller's aliases reach the service's Execution as they are: it computes none.
	if strings.Join(v.Aliases, ",") != "up__echo" {
		t.Errorf("aliases %v, want the caller's [up__echo]", v.Aliases)
	}
	if tools.calls.Load() != 8 || tools.reads.Load() != 1 {
		t.Errorf("the caller's ToolCaller saw %d calls and %d reads, want 8 and 1", tools.calls.Load(), tools.reads.Load())
	}
	// The credential is resolved afresh for every request: describe, start and nine replies.
	if n := resolved.Load(); n != 11 {
		t.Errorf("the credential was resolved %d times, want 11", n)
	}
}

// recorder is a caller's ToolCaller: it answers each call with its arguments.
type recorder struct{ calls, reads atomic.Int32 }

func (r *recorder) CallTool(_ context.Context, name string, args json.RawMessage) toolcall.Answer {
	r.calls.Add(1)
	time.Sleep(time.Duration(r.calls.Load()%3) * time.Millisecond)
	return toolcall.Answer{Value: json.RawMessage(`{"echo":` + string(args) + `}`)}
}

func (r *recorder) ReadHandle(_ context.Context, handle string, offset, limit int, pattern string) toolcall.Answer {
	r.reads.Add(1)
	return toolcall.Answer{Value: json.RawMessage(fmt.Sprintf(`"%s %d %d %s"`, handle, offset, limit, pattern))}
}

// Past MaxExecutions a start is answered 503; draining refuses new executions, turns
// /readyz and describe to not ready, and ends the running ones when its deadline passes,
// which their callers see as provider_error.
func TestServiceBusyAndDrain(t *testing.T) {
	release := make(chan struct{})
	sb := &scripted{level: engine.LevelProcess, run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		select {
		case <-release:
		case <-ctx.Done():
			res := engine.Refuse(engine.Terms{}, failure.Cancelled, "cancelled")
			res.Failure.Executed, res.Cancelled = true, true
			return res
		}
		return nil
	}}
	svc, url, ids := scriptedService(t, sb, service.Options{MaxExecutions: 1})
	first := make(chan *engine.Outcome, 1)
	go func() { first <- as(t, url, "alice-token").Run(context.Background(), engine.Execution{Program: "p"}) }()
	<-ids
	if res := as(t, url, "bob-token").Run(context.Background(), engine.Execution{Program: "p"}); res.Failure == nil ||
		res.Failure.Kind != failure.ProviderError || !strings.Contains(res.Failure.Message, "503") || res.Failure.Executed {
		t.Errorf("a start past MaxExecutions: %+v", res.Failure)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	drained := make(chan bool, 1)
	go func() { drained <- svc.Drain(ctx) }()
	time.Sleep(100 * time.Millisecond)
	if resp, err := http.Get(url + remote.PathReady); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz while draining: %v %v", resp, err)
	}
	if d := as(t, url, "bob-token").Describe(context.Background()); d.Ready {
		t.Errorf("described ready while draining")
	}
	if ok := <-drained; ok {
		t.Errorf("Drain reported every execution ended on its own")
	}
	if res := <-first; res.Failure == nil || res.Failure.Kind != failure.ProviderError || !res.Failure.Executed {
		t.Errorf("an execution the service ended: %+v", res.Failure)
	}
	close(release)
}
