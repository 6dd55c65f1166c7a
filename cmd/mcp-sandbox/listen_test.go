package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestServeHTTPConnectionsBounded drives the built binary: a keep-alive connection that sits
// idle, and one that never sends a request, are closed after --http-timeout; a connection past
// --max-connections-per-address is refused with a 503 saying so, and its slot comes back when
// one closes; and a streamed run_code that runs for longer than the timeout is not cut.
func TestServeHTTPConnectionsBounded(t *testing.T) {
	base, _ := startHTTPArgs(t, "", nil, "--http-timeout", "1s", "--max-connections-per-address", "6")
	addr := strings.TrimPrefix(base, "http://")
	dial := func() net.Conn { return testkit.DialTCP(t, addr) }

	// An idle keep-alive connection after one request.
	idle := dial()
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", err, resp)
	}
	io.Copy(io.Discard, resp.Body)
	silent := dial() // never sends anything
	if !testkit.ClosedWithin(idle, 6*time.Second) {
		t.Errorf("an idle keep-alive connection is still open after the 1s timeout")
	}
	if !testkit.ClosedWithin(silent, 6*time.Second) {
		t.Errorf("a connection that never sent a request is still open after the 1s timeout")
	}

	// The per-address cap, with a clear refusal.
	wantCapped(t, base, 6)

	// A run_code streaming progress for three times the timeout completes.
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	var progress atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, r := runCode(t, ctx, cs, "import time\ntime.sleep(3)\n'done'", "long")
	if res.IsError || string(r.Value) != `"done"` {
		t.Fatalf("a 3 s streamed run_code under a 1 s timeout: %s", testkit.Text(res))
	}
	time.Sleep(1500 * time.Millisecond) // the session's connections idle out meanwhile
	if res, r := runCode(t, ctx, cs, "6*7", nil); res.IsError || string(r.Value) != "42" {
		t.Fatalf("the session after its connections idled out: %s", testkit.Text(res))
	}
	if progress.Load() == 0 {
		t.Errorf("no progress arrived on the stream")
	}
}

// wantCapped holds n connections to the server at base, checks that one more is refused with
// a 503 naming the per-address limit, and that a connection is accepted once they close.
func wantCapped(t *testing.T, base string, n int) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("limit of %d connections", n); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), want) {
		t.Errorf("over the cap: %d %q, want 503 and %q", resp.StatusCode, body, want)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	if !waitFor(5*time.Second, func() bool {
		r, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	}) {
		t.Errorf("no connection accepted after the held ones closed")
	}
}

// TestSandboxServiceConnectionsBounded: the sandbox service refuses a connection past
// --max-connections-per-address with a 503 saying so, as the MCP listener does.
func TestSandboxServiceConnectionsBounded(t *testing.T) {
	base, _, _, _ := startService(t, "--max-connections-per-address", "4")
	wantCapped(t, base, 4)
}
