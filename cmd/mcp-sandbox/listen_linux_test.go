package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/httpguard"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/remote"
)

// floodConns is how many idle unauthenticated connections the flood tests open: the
// default --max-connections, from four addresses, each at the default per-address cap.
const floodConns = 1024

// floodWithin is how soon an authenticated client must get its run_code through the flood:
// the bound issue 25 sets, far above the tens of milliseconds a warm run takes on a loaded
// machine and far below the idle timeout (60 s) a held slot used to last.
const floodWithin = 5 * time.Second

// needFiles skips unless this process may hold the flood's connections and its own.
func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var r syscall.Rlimit
	err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	if err == nil && r.Cur < n {
		r.Cur = min(n, r.Max)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
		err = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	}
	gate.Require(t, "files", err == nil && r.Cur >= n,
		fmt.Sprintf("the open-file limit (ulimit -n) is %d (%v), under the %d this test holds; raise its hard limit to run it", r.Cur, err, n))
}

// flood opens floodConns connections to addr from 127.0.0.2-5, a quarter of each address's
// sending one unauthenticated GET /healthz and then idling, the rest silent, and holds them
// open (never reading) until the test ends. It returns them.
func flood(t *testing.T, addr string) []net.Conn {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range floodConns {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%4))}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d of the flood: %v", i, err)
		}
		conns = append(conns, c)
		if i%4 == 0 {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
				t.Fatalf("connection %d of the flood: %v", i, err)
			}
		}
	}
	return conns
}

// stillOpen counts the connections the server has not closed: a read that times out within a
// millisecond finds one open; the end of its stream (after any answer), closed.
func stillOpen(conns []net.Conn) int {
	n := 0
	for _, c := range conns {
		if !testkit.ClosedWithin(c, time.Millisecond) {
			n++
		}
	}
	return n
}

// freshTransport is a transport with no connection of its own yet.
func freshTransport() *http.Transport {
	return http.DefaultTransport.(*http.Transport).Clone()
}

// TestServeUnauthenticatedFlood: 1,024 idle unauthenticated connections from four addresses
// (issue 25, finding 6) do not keep a client with a token from running run_code: the
// connections without a token never hold the slots reserved for authenticated ones (issue
// 38: counted, at most MaxConns less the reserve stay open), the oldest of them makes room
// for a new one, and an answer without a token closes its connection.
func TestServeUnauthenticatedFlood(t *testing.T) {
	needFiles(t, floodConns+512)
	cfg := filepath.Join(t.TempDir(), "serve.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(httpConfig, configs.HashToken("token-a"), configs.HashToken("token-b"))), 0o644)
	base, _ := startHTTPArgs(t, cfg, nil)
	addr := strings.TrimPrefix(base, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func() *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "flood-test", Version: "0"}, nil)
		tr := freshTransport()
		t.Cleanup(tr.CloseIdleConnections)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
			HTTPClient: &http.Client{Transport: bearerOver{token: "token-a", rt: tr}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	// Warm: the measured run is not the profile's first.
	if res, r := runCode(t, ctx, connect(), "1", nil); res.IsError || string(r.Value) != "1" {
		t.Fatalf("warm-up run_code: %s", testkit.Text(res))
	}

	conns := flood(t, addr)
	// 200 more, silent, from a fifth address: more silent connections (968) than the cap on
	// unauthenticated ones (768) and fewer than the one on all (1024), so only the first
	// keeps them out.
	for range 200 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 6)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("a silent connection past the flood: %v", err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	start := time.Now()
	res, r := runCode(t, ctx, connect(), "6*7", nil)
	took := time.Since(start)
	// The cap itself: connections that carried no token never hold more than MaxConns less
	// the reserve, whatever the flood; the oldest made room for the newer ones.
	if open, unauthCap := stillOpen(conns), httpguard.DefaultMaxConns-httpguard.DefaultMaxConns/httpguard.AuthReserve; open > unauthCap {
		t.Errorf("the server holds %d of the flood's %d unauthenticated connections open, more than the cap of %d", open, len(conns), unauthCap)
	} else {
		t.Logf("the server holds %d of the flood's %d unauthenticated connections open (cap %d)", open, len(conns), unauthCap)
	}
	if res.IsError || string(r.Value) != "42" {
		t.Fatalf("run_code through the flood: %s", testkit.Text(res))
	}
	t.Logf("an authenticated run_code through %d unauthenticated connections took %s", floodConns, took.Round(time.Millisecond))
	if took > floodWithin {
		t.Errorf("an authenticated run_code through the flood took %s, more than %s", took.Round(time.Millisecond), floodWithin)
	}
}

// TestServeUnauthenticatedAnswersClose: a connection without a token is closed after its
// answer (the public /healthz too) and, when it sends nothing, within seconds; one with a
// token stays open for its next request.
func TestServeUnauthenticatedAnswersClose(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "serve.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(httpConfig, configs.HashToken("token-a"), configs.HashToken("token-b"))), 0o644)
	base, _ := startHTTPArgs(t, cfg, nil)
	addr := strings.TrimPrefix(base, "http://")
	closedAfter := func(req string) (time.Duration, bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if req != "" {
			io.WriteString(c, req)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.Copy(io.Discard, c)
		return time.Since(start), err == nil
	}
	for _, req := range []string{
		"GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 0\r\n\r\n",
		"GET /nowhere HTTP/1.1\r\nHost: " + addr + "\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer wrong\r\n\r\n",
	} {
		if took, closed := closedAfter(req); !closed || took > httpguard.PreAuthTimeout {
			t.Errorf("%q: closed %v after %s; want closed after its answer", strings.SplitN(req, "\r\n", 2)[0], closed, took)
		}
	}
	if took, closed := closedAfter(""); !closed || took < httpguard.PreAuthTimeout/2 {
		t.Errorf("a silent connection: closed %v after %s; want closed after about %s", closed, took, httpguard.PreAuthTimeout)
	}
	// With a token the connection stays for the next request past the pre-auth timeout.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer token-b\r\n\r\n"
	io.WriteString(c, get)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("/healthz with a token: %v %+v", err, resp)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	time.Sleep(httpguard.PreAuthTimeout + time.Second)
	io.WriteString(c, get)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("a connection with a token after the pre-auth timeout: %v %+v", err, resp)
	}
}

// TestSandboxServiceUnauthenticatedFlood is TestServeUnauthenticatedFlood for the sandbox
// service: a caller with its token (a new client: a transport of its own, no connection yet)
// runs a program through the flood.
func TestSandboxServiceUnauthenticatedFlood(t *testing.T) {
	needFiles(t, floodConns+512)
	url, token, _, _ := startService(t)
	client, err := remote.New(&remote.Options{URL: url, Bearer: func(context.Context) (string, error) { return token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if res := client.Run(context.Background(), engine.Execution{Program: "1"}); res.Failure != nil {
		t.Fatalf("warm-up: %+v", res.Failure)
	}
	_ = flood(t, strings.TrimPrefix(url, "http://"))
	fresh, err := remote.New(&remote.Options{URL: url, Bearer: func(context.Context) (string, error) { return token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	start := time.Now()
	res := fresh.Run(context.Background(), engine.Execution{Program: "6*7"})
	took := time.Since(start)
	if res.Failure != nil || string(res.Value) != "42" {
		t.Fatalf("6*7 through the flood: %+v %s", res.Failure, res.Value)
	}
	t.Logf("an authenticated execution through %d unauthenticated connections took %s", floodConns, took.Round(time.Millisecond))
	if took > floodWithin {
		t.Errorf("an authenticated execution through the flood took %s, more than %s", took.Round(time.Millisecond), floodWithin)
	}
}

// bearerOver sets the token on every request and sends it over rt.
type bearerOver struct {
	token string
	rt    http.RoundTripper
}

func (b bearerOver) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}
