//go:build linux

package container

import (
	"errors"
	"fmt"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The token check, the pending bound and the wait are internal/tokenconn's, tested there;
// these tests hold what the container's channel adds: the socket file, the peer's process.

func dial(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newChannel listens at a fresh socket under dir (a temporary directory when empty).
func newChannel(t *testing.T, dir string, onEnd func()) (ch *channel, path, token string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	path, token = filepath.Join(dir, channelSocket), tokenconn.NewToken()
	ch, err := listen(path, token, onEnd)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch, path, token
}

// A connection that presents the token becomes the channel, and then the socket file is gone,
// a second connection is refused, and the peer is this process.
func TestChannelTokenAndSecondConnection(t *testing.T) {
	ch, path, token := newChannel(t, "", nil)
	if ch.connected() {
		t.Fatal("connected before the token arrived")
	}

	child := dial(t, path)
	if _, err := io.WriteString(child, token+"\n"+`{"type":"hello"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(`{"type":"hello"}`+"\n"))
	if _, err := io.ReadFull(ch, got); err != nil || string(got) != `{"type":"hello"}`+"\n" {
		t.Fatalf("the channel read %q, %v: want the bytes after the token line", got, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket file is still there after the token arrived: %v", err)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		t.Fatal("a second connection was accepted")
	}
	if ch.peer() != os.Getpid() {
		t.Errorf("peer pid %d, want %d (this process connected)", ch.peer(), os.Getpid())
	}
}

// A child that exits before connecting ends the channel as an end of file, and the socket
// file is removed with the listener.
func TestChannelEnds(t *testing.T) {
	ch, path, _ := newChannel(t, "", nil)
	done := make(chan error, 1)
	go func() {
		_, err := ch.Read(make([]byte, 1))
		done <- err
	}()
	ch.fail(errNoChild)
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the child exited: %v, want an EOF", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket file is still there after the channel failed: %v", err)
	}
	ch.Close()
	ch.Close()
}

// A state directory deeper than a socket path may be still works: the socket is bound
// through the directory's descriptor, and removed by its real name.
func TestChannelDeepDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ch, path, token := newChannel(t, dir, nil)
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := dial(t, fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), channelSocket))
	if _, err := io.WriteString(c, token+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(ch, "x"); err != nil || !ch.connected() {
		t.Fatalf("the child did not become the channel: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket file is still there: %v", err)
	}
}

// The end of the connection is reported after onEnd, which can tell a peer that exited from
// one that only closed its end.
func TestChannelPeerExited(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		gate.Require(t, "python", false, "no python3")
	}
	var ch *channel
	var exited []bool
	ch, path, token := newChannel(t, "", func() { exited = append(exited, ch.proc.Exiting()) })
	peer := exec.Command(py, "-c", "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(sys.argv[2].encode() + b'\\n')", path, token)
	if out, err := peer.CombinedOutput(); err != nil {
		t.Fatalf("peer: %v: %s", err, out)
	}
	if n, err := ch.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the peer exited: %d, %v", n, err)
	}
	if _, err := ch.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("second Read: %v", err)
	}
	if len(exited) != 1 || !exited[0] {
		t.Fatalf("onEnd saw exited=%v, want one call that saw the peer gone", exited)
	}

	ch2, path2, token2 := newChannel(t, "", nil)
	c := dial(t, path2)
	if _, err := io.WriteString(c, token2+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(ch2, "x"); err != nil {
		t.Fatal(err)
	}
	if ch2.proc.Exiting() {
		t.Error("this very process reads as exited")
	}
}
