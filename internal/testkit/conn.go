package testkit

import (
	"io"
	"net"
	"testing"
	"time"
)

// DialTCP connects to addr, closed when the test ends.
func DialTCP(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ClosedWithin reports whether the server closes c within d: EOF says it did, a timeout that
// it is still open. What the server sends before it closes is read and dropped.
func ClosedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil
}
