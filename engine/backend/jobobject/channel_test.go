package jobobject

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
)

// The token check, the pending bound and the wait are internal/tokenconn's, tested there;
// these tests hold the jobobject's use of it: a listener on 127.0.0.1 at port, and errNoChild.

func dial(t *testing.T, c *channel) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port())))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// The channel listens on 127.0.0.1 at port and takes the connection that presents the token;
// once it is in, the listener is gone.
func TestChannelTakesOnlyTheToken(t *testing.T) {
	token := tokenconn.NewToken()
	c, err := listen(token)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := c.port()

	right := dial(t, c)
	defer right.Close()
	if _, err := right.Write([]byte(token + "\nfirst frame\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "first frame\n" {
		t.Fatalf("read %q, %v: want what followed the token", line, err)
	}
	if _, err := c.Write([]byte("reply\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(right).ReadString('\n'); err != nil || got != "reply\n" {
		t.Fatalf("the child read %q, %v", got, err)
	}
	if second, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		second.Close()
		t.Fatal("a second connection was accepted after the token's")
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := right.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after CloseWrite the child read %v, want EOF", err)
	}
	if _, ok := any(c).(interface{ SetWriteDeadline(t time.Time) error }); ok {
		t.Error("the channel offers SetWriteDeadline, which the engine would apply")
	}
}

// A child that never connects: fail ends the wait, and Read returns the end of the channel.
func TestChannelFailEndsTheWait(t *testing.T) {
	c, err := listen(tokenconn.NewToken())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	c.fail(errNoChild)
	if err := <-read; !errors.Is(err, io.EOF) {
		t.Fatalf("Read returned %v, want the end of the channel", err)
	}
}
