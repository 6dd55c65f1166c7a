package tokenconn

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// serve starts a Channel on a loopback TCP listener, closed when the test ends.
func serve(t *testing.T, opts Options) (*Channel, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = gate.Scaled(30 * time.Second)
	}
	token := NewToken()
	c := Serve(ln, token, &opts)
	t.Cleanup(func() { c.Close() })
	return c, token
}

func dial(t *testing.T, c *Channel) net.Conn {
	t.Helper()
	conn, err := net.Dial(c.Addr().Network(), c.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dropped reports whether the host closed conn without a byte: an end of file, or a reset
// when the host closed with bytes of ours unread.
func dropped(t *testing.T, conn net.Conn) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(gate.Scaled(2 * time.Second)))
	n, err := conn.Read(make([]byte, 1))
	var ne net.Error
	return n == 0 && err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A connection without the token is dropped, one with it becomes the channel (Accepted runs on
// it once) and keeps the bytes after the token line, a connection still presenting one is
// dropped then, and a second connection is refused.
func TestTokenAndSecondConnection(t *testing.T) {
	var accepted []net.Conn
	c, token := serve(t, Options{Accepted: func(conn net.Conn) { accepted = append(accepted, conn) }})
	for name, first := range map[string]string{
		"a wrong token":                 strings.Repeat("0", len(token)) + "\n",
		"another token":                 NewToken() + "\nhello\n",
		"a hello frame instead":         `{"type":"hello","version":1,"probe":{}}` + "\n",
		"the token without its newline": token + "x",
		"the token with a prefix":       "x" + token + "\n",
		"an empty line":                 "\n",
	} {
		conn := dial(t, c)
		if _, err := io.WriteString(conn, first); err != nil {
			t.Fatal(err)
		}
		if !dropped(t, conn) {
			t.Errorf("%s: the connection was not dropped", name)
		}
	}
	silent := dial(t, c) // says nothing: must not hold the channel up
	if c.Connected() {
		t.Fatal("connected before the token arrived")
	}

	child := dial(t, c)
	if _, err := io.WriteString(child, token+"\n"+`{"type":"hello"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(`{"type":"hello"}`+"\n"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != `{"type":"hello"}`+"\n" {
		t.Fatalf("the channel read %q, %v: want the bytes after the token line", got, err)
	}
	if _, err := io.WriteString(c, "run\n"); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 4)
	if _, err := io.ReadFull(child, back); err != nil || string(back) != "run\n" {
		t.Fatalf("the child read %q, %v", back, err)
	}
	if len(accepted) != 1 || accepted[0].LocalAddr().String() != child.RemoteAddr().String() || accepted[0].RemoteAddr().String() != child.LocalAddr().String() {
		t.Errorf("Accepted ran on %v, want once on the child's connection", accepted)
	}
	if !dropped(t, silent) {
		t.Error("a connection still waiting to present a token was not dropped once the token arrived")
	}
	if second, err := net.Dial(c.Addr().Network(), c.Addr().String()); err == nil {
		second.Close()
		t.Fatal("a second connection was accepted after the token's")
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := child.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after CloseWrite the child read %v, want EOF", err)
	}
}

// Beyond MaxPending a connection is dropped at once, and one that was pending can still
// present the token.
func TestPendingBound(t *testing.T) {
	c, token := serve(t, Options{MaxPending: 1})
	first := dial(t, c)  // accepted first (the backlog is in order), and pending
	second := dial(t, c) // beyond the bound
	if !dropped(t, second) {
		t.Fatal("a connection beyond MaxPending was not dropped")
	}
	if _, err := io.WriteString(first, token+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "x"); err != nil || !c.Connected() {
		t.Fatalf("the pending connection did not become the channel: %v", err)
	}
}

// Fail ends the wait: Read and Write return its error, and CloseWrite has no connection to
// close. Close unblocks a writer and is idempotent.
func TestFailAndClose(t *testing.T) {
	c, _ := serve(t, Options{})
	errNoChild := errors.New("no child")
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	c.Fail(errNoChild)
	if err := <-done; !errors.Is(err, errNoChild) {
		t.Fatalf("Read after Fail: %v", err)
	}
	select {
	case <-c.Ready():
	default:
		t.Error("Ready is not closed after Fail")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, errNoChild) {
		t.Errorf("Write after Fail: %v", err)
	}
	if err := c.CloseWrite(); err == nil {
		t.Error("CloseWrite without a connection succeeded")
	}
	if _, err := net.Dial(c.Addr().Network(), c.Addr().String()); err == nil {
		t.Error("the listener still accepts after Fail")
	}

	c2, _ := serve(t, Options{})
	go func() {
		_, err := c2.Write([]byte("x"))
		done <- err
	}()
	c2.Close()
	c2.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

// OnEnd runs once, before Read reports the end of the accepted connection.
func TestOnEnd(t *testing.T) {
	ends := 0
	c, token := serve(t, Options{OnEnd: func() { ends++ }})
	child := dial(t, c)
	if _, err := io.WriteString(child, token+"\nx"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "x" || ends != 0 {
		t.Fatalf("read %q, %v with %d ends before the child closed", b, err, ends)
	}
	child.Close()
	for range 2 {
		if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("Read after the child closed: %d, %v", n, err)
		}
	}
	if ends != 1 {
		t.Fatalf("OnEnd ran %d times, want once", ends)
	}
}

// A write deadline set before the connection arrives applies to it once accepted.
func TestWriteDeadlineBeforeAccept(t *testing.T) {
	c, token := serve(t, Options{})
	if err := c.SetWriteDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	child := dial(t, c)
	if _, err := io.WriteString(child, token+"\n"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Write([]byte("x"))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Write past the deadline set before the connection: %v, want a timeout", err)
	}
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("Write with the deadline cleared: %v", err)
	}
}
