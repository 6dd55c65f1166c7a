package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestHTTPBearer serves a go-sdk server over streamable HTTP on loopback and checks that the
// credential is resolved for every request, sent, and never logged.
func TestHTTPBearer(t *testing.T) {
	var bad atomic.Int32
	h := echoToolHandler(nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-s3cret" {
			bad.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	var resolved atomic.Int32
	turn, logs := webTurn(t, Server{Name: "web", URL: ts.URL, Bearer: func(context.Context) (string, error) {
		resolved.Add(1)
		return "tok-s3cret", nil
	}})
	if got := wantOK(t, callCtx(context.Background(), turn, "web__echo", json.RawMessage(`{"s":"hi"}`))); got != `"hi"` {
		t.Errorf("echo = %s", got)
	}
	before := resolved.Load()
	wantOK(t, callCtx(context.Background(), turn, "web__echo", json.RawMessage(`{"s":"again"}`)))
	if resolved.Load() <= before || bad.Load() != 0 {
		t.Errorf("credential resolved %d→%d times, %d unauthorized requests", before, resolved.Load(), bad.Load())
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("credential logged:\n%s", logs)
	}
}

func TestFrameLimitAndBlocks(t *testing.T) {
	f := newFixture(t, func(s *Server) { s.MaxFrameBytes = 64 << 10 })
	turn := f.turn(t, nil, nil, nil)
	wantOK(t, call(t, turn, "docs__bytes", `{"n":1000}`))
	wantKind(t, call(t, turn, "docs__bytes", `{"n":200000}`), failure.UpstreamError)
	wantOK(t, call(t, f.turn(t, nil, nil, nil), "docs__bytes", `{"n":1000}`))
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(wantOK(t, call(t, turn, "docs__mixed", ""))), &blocks); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0]["type"] != "text" || blocks[1]["type"] != "image" || blocks[1]["mimeType"] != "image/png" || blocks[1]["data"] != "aGVsbG8=" {
		t.Errorf("blocks = %v", blocks)
	}
}

// echoToolHandler serves a go-sdk server whose one tool, echo, answers its argument s.
func echoToolHandler(opts *mcp.StreamableHTTPOptions) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "h", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			S string `json:"s"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.S}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
}

// webTurn pools the one server s, named web, logging at debug level into the log it returns,
// closes the pool when the test ends, and resolves a turn on web, which must list cleanly.
func webTurn(t *testing.T, s Server) (*Turn, *testkit.Log) {
	t.Helper()
	logs := &testkit.Log{}
	p, err := NewPool(&PoolOptions{
		Servers: []Server{s},
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cat := p.Catalogue(context.Background())
	if len(cat.Problems()) > 0 {
		t.Fatalf("problems: %v\n%s", cat.Problems(), logs)
	}
	return cat.Resolve([]string{"web"}, nil, nil, nil), logs
}

// echoHandler serves one go-sdk server with a big tool returning n bytes of text, over
// streamable HTTP.
func echoHandler(opts *mcp.StreamableHTTPOptions) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "h", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Big."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.N)}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
}

// TestHTTPBearerNotSentAcrossRedirect redirects every request to a second loopback server:
// the redirect is refused and the second server never sees the credential.
func TestHTTPBearerNotSentAcrossRedirect(t *testing.T) {
	var leaked, reached atomic.Int32
	h := echoHandler(nil)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer first.Close()

	p, err := NewPool(&PoolOptions{
		Servers: []Server{{Name: "web", URL: first.URL, Bearer: func(context.Context) (string, error) {
			return "tok-s3cret", nil
		}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cat := p.Catalogue(context.Background())
	if leaked.Load() != 0 {
		t.Fatalf("the redirect target received the credential %d times", leaked.Load())
	}
	if reached.Load() != 0 {
		t.Errorf("a cross-host redirect was followed %d times", reached.Load())
	}
	if len(cat.Problems()) == 0 {
		t.Errorf("listing through a refused redirect reported no problem")
	}
}

// TestHTTPBearerOnlyToEndpoint checks the transport on its own: a request to another host
// gets no credential, one to the endpoint does.
func TestHTTPBearerOnlyToEndpoint(t *testing.T) {
	var got []string
	rt := &bearerTransport{
		resolve:  func(context.Context) (string, error) { return "tok", nil },
		endpoint: mustURL(t, "http://127.0.0.1:8000/mcp"),
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = append(got, r.Header.Get("Authorization"))
			return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
		}),
	}
	for _, u := range []string{"http://127.0.0.1:8000/other", "http://127.0.0.1:8001/mcp", "https://127.0.0.1:8000/mcp"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"Bearer tok", "", ""}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Authorization headers = %q, want %q", got, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestHTTPResponseBounded has a JSON-response upstream answer past the frame limit: the call
// fails with upstream_error instead of being buffered whole, and a small call still works.
func TestHTTPResponseBounded(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		ts := httptest.NewServer(echoHandler(&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
		p, err := NewPool(&PoolOptions{
			Servers: []Server{{Name: "web", URL: ts.URL, MaxFrameBytes: 64 << 10}},
			Logger:  slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		cat := p.Catalogue(context.Background())
		if len(cat.Problems()) > 0 {
			t.Fatalf("problems: %v", cat.Problems())
		}
		turn := cat.Resolve([]string{"web"}, nil, nil, nil)
		wantOK(t, call(t, turn, "web__big", `{"n":1000}`))
		wantKind(t, call(t, turn, "web__big", `{"n":1000000}`), failure.UpstreamError)
		wantOK(t, call(t, p.Catalogue(context.Background()).Resolve([]string{"web"}, nil, nil, nil), "web__big", `{"n":1000}`))
		p.Close()
		ts.Close()
	}
}

// A credential that cannot be had is what the model is told about the server (issue 23: the
// model read "connecting to it failed" while only the log said DOCS_TOKEN is not set).
func TestHTTPCredentialReasonReachesTheModel(t *testing.T) {
	var reached atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer ts.Close()
	p, err := NewPool(&PoolOptions{
		Servers: []Server{{Name: "docs", URL: ts.URL, Bearer: func(context.Context) (string, error) {
			return "", &CredentialError{Reason: "the environment variable DOCS_TOKEN is not set",
				Err: errors.New("credential env:DOCS_TOKEN: environment variable DOCS_TOKEN is not set")}
		}}},
		Logger: slog.New(slog.NewTextHandler(&testkit.Log{}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	turn := p.Catalogue(context.Background()).Resolve([]string{"docs"}, nil, nil, nil)
	const want = "its credential is not available: the environment variable DOCS_TOKEN is not set"
	if got := turn.Problems()["docs"]; !strings.Contains(got, want) {
		t.Errorf("problem = %q, want it to say %q", got, want)
	}
	if r := call(t, turn, "docs__anything", "{}"); !strings.Contains(r.Message, "DOCS_TOKEN is not set") {
		t.Errorf("a call of its tools says %q", r.Message)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the server was sent %d requests without a credential", n)
	}
}
