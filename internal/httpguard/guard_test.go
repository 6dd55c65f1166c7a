package httpguard

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// capServer serves "ok" behind a Listener of limits whose requests are authenticated when
// they carry "X-Auth: yes", with the pre-auth timeout preAuth; it returns the address.
func capServer(t *testing.T, limits Limits, preAuth time.Duration) string {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewListener(inner, limits)
	ln.preAuth = preAuth
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 30 * time.Second}
	Gate(srv, func(r *http.Request) bool { return r.Header.Get("X-Auth") == "yes" })
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return inner.Addr().String()
}

// request sends one GET over c and reads its answer: the status, and whether the server
// said it closes the connection.
func request(t *testing.T, c net.Conn, br *bufio.Reader, auth bool) (int, bool) {
	t.Helper()
	h := ""
	if auth {
		h = "X-Auth: yes\r\n"
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"+h+"\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Close
}

// closed reports whether the server has closed c (within 30 s).
func closed(c net.Conn) bool { return testkit.ClosedWithin(c, 30*time.Second) }

// TestCapListenerReserve: connections that carried no authenticated request never hold the
// last quarter of the cap; a new connection finding no room closes the oldest of them; an
// authenticated connection is never closed for another; once every slot is authenticated, the
// next connection is refused with a 503.
func TestCapListenerReserve(t *testing.T) {
	addr := capServer(t, Limits{MaxConns: 8}, time.Hour)
	dial := func() net.Conn { return testkit.DialTCP(t, addr) }
	// Two authenticated connections, kept alive.
	var authed []net.Conn
	for range 2 {
		c := dial()
		if code, cl := request(t, c, bufio.NewReader(c), true); code != 200 || cl {
			t.Fatalf("an authenticated request: %d, close %v", code, cl)
		}
		authed = append(authed, c)
	}
	// Unauthenticated ones: six fit (8 less a quarter); each one more closes the oldest.
	var idle []net.Conn
	for range 8 {
		idle = append(idle, dial())
		time.Sleep(20 * time.Millisecond) // accepted in order
	}
	for i, c := range idle[:2] {
		if !closed(c) {
			t.Errorf("unauthenticated connection %d (of the oldest) is still open past the unauthenticated share", i)
		}
	}
	// A new client gets in (closing the oldest idle one) and, once authenticated, stays.
	c := dial()
	br := bufio.NewReader(c)
	if code, cl := request(t, c, br, true); code != 200 || cl {
		t.Fatalf("a new authenticated client: %d, close %v", code, cl)
	}
	if !closed(idle[2]) {
		t.Error("the oldest idle connection was not closed to make room")
	}
	authed = append(authed, c)
	for i, c := range authed {
		if code, _ := request(t, c, bufio.NewReader(c), true); code != 200 {
			t.Errorf("authenticated connection %d: %d", i, code)
		}
	}
	// Fill every slot with authenticated connections: the next is refused.
	for range 5 {
		c := dial()
		if code, _ := request(t, c, bufio.NewReader(c), true); code != 200 {
			t.Fatalf("filling the cap: %d", code)
		}
	}
	over := dial()
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "limit of 8 connections") {
		t.Errorf("over the cap: %d %s", resp.StatusCode, body)
	}
}

// TestCapListenerPreAuth: a connection that carries no authenticated request is closed after
// the pre-auth timeout, and after the answer to a request without one; an authenticated one
// outlives the timeout.
func TestCapListenerPreAuth(t *testing.T) {
	addr := capServer(t, Limits{MaxConns: 8}, 300*time.Millisecond)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	if !closed(silent) || time.Since(start) < 250*time.Millisecond {
		t.Errorf("a silent connection: closed after %s, want after the 300ms pre-auth timeout", time.Since(start))
	}
	anon, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if code, cl := request(t, anon, bufio.NewReader(anon), false); code != 200 || !cl {
		t.Errorf("an unauthenticated request: %d, close %v; want its answer and Connection: close", code, cl)
	}
	if !closed(anon) {
		t.Error("the connection stayed open after an unauthenticated answer")
	}
	a, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	br := bufio.NewReader(a)
	request(t, a, br, true)
	time.Sleep(600 * time.Millisecond)
	if code, cl := request(t, a, br, true); code != 200 || cl {
		t.Errorf("an authenticated connection past the pre-auth timeout: %d, close %v", code, cl)
	}
}
