package main

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestRunStartsThreeProcesses watches, through the kernel's process events, every process
// `mcp-sandbox run` of pass starts on the default profile as root (namespaces): three
// programs are executed, one after another, the command, the init helper (pid 1 of the
// child's namespace, which confines itself and starts the interpreter as its child) and the
// interpreter (docs/design.md §19.2). A fork that execs nothing (Go's one-time pidfd check)
// starts no program.
func TestRunStartsThreeProcesses(t *testing.T) {
	requireNamespaces(t)
	prog := filepath.Join(t.TempDir(), "pass.py")
	if err := os.WriteFile(prog, []byte("pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	run := func() *exec.Cmd {
		cmd := exec.Command(testkit.Binary(t), "run", prog)
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		return cmd
	}
	if out, err := run().CombinedOutput(); err != nil { // the interpreter cache and the helper file, once
		t.Fatalf("run: %v\n%s", err, out)
	}
	w, err := watchProcesses()
	gate.Require(t, "namespaces", err == nil, "the kernel's process events cannot be read here: "+errString(err))
	defer w.close()
	cmd := run()
	var out strings.Builder // read once Wait returned: the command writes it until then
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := func() error {
		w.mu.Lock() // the command's pid is its tree's root before any of its events is read
		defer w.mu.Unlock()
		if err := cmd.Start(); err != nil {
			return err
		}
		w.tree[uint32(cmd.Process.Pid)] = true
		return nil
	}(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	time.Sleep(200 * time.Millisecond) // the last events in flight
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatalf("reading process events: %v", w.err)
	}
	// The command's own exec comes after its pid went into the tree (the events are read once
	// Start returned): it is the first.
	if len(w.execs) != 3 {
		t.Fatalf("run started %d programs (%v), want 3: the command, the init helper, the interpreter", len(w.execs), w.execs)
	}
	if w.execs[0] != "mcp-sandbox" || !strings.HasPrefix(w.execs[1], "init-") || !strings.HasPrefix(w.execs[2], "python") {
		t.Errorf("run exec'd %v, want the command, the init helper, then the interpreter", w.execs)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// processWatcher follows the process events of the kernel's proc connector (root, in the
// initial pid and user namespaces): forks grow tree from the pids put in it, and each exec in
// the tree is noted by the new program's name.
type processWatcher struct {
	fd    int
	mu    sync.Mutex
	tree  map[uint32]bool
	execs []string
	err   error
	done  chan struct{}
}

// The proc connector's constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc          = 1
	cnValProc          = 1
	procCnMcastListen  = 1
	procEventFork      = 0x1
	procEventExec      = 0x2
	nlmsgHdrLen        = 16
	cnMsgLen           = 20
	procEventHeaderLen = 16 // what, cpu, timestamp_ns
)

func watchProcesses() (*processWatcher, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) // a busy machine's events
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.NLMSG_DONE)
	binary.NativeEndian.PutUint32(msg[12:], uint32(os.Getpid()))
	binary.NativeEndian.PutUint32(msg[16:], cnIdxProc)
	binary.NativeEndian.PutUint32(msg[20:], cnValProc)
	binary.NativeEndian.PutUint16(msg[32:], 4)
	binary.NativeEndian.PutUint32(msg[36:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	w := &processWatcher{fd: fd, tree: map[uint32]bool{}, done: make(chan struct{})}
	go w.read()
	return w, nil
}

func (w *processWatcher) read() {
	defer close(w.done)
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			w.mu.Lock()
			if !errors.Is(err, unix.EBADF) {
				w.err = err // ENOBUFS: events were lost, and the count could be wrong
			}
			w.mu.Unlock()
			return
		}
		for b := buf[:n]; len(b) >= nlmsgHdrLen; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < nlmsgHdrLen || l > len(b) {
				break
			}
			w.event(b[nlmsgHdrLen+cnMsgLen : l])
			b = b[(l+3)&^3:]
		}
	}
}

// event notes one proc_event: a fork in the tree adds the child, an exec in it the program.
func (w *processWatcher) event(e []byte) {
	if len(e) < procEventHeaderLen+16 {
		return
	}
	what, data := binary.NativeEndian.Uint32(e), e[procEventHeaderLen:]
	w.mu.Lock()
	defer w.mu.Unlock()
	switch what {
	case procEventFork: // parent_pid, parent_tgid, child_pid, child_tgid
		if w.tree[binary.NativeEndian.Uint32(data[4:])] {
			w.tree[binary.NativeEndian.Uint32(data[12:])] = true
		}
	case procEventExec: // process_pid, process_tgid
		if pid := binary.NativeEndian.Uint32(data[4:]); w.tree[pid] {
			comm, _ := os.ReadFile("/proc/" + itoa(pid) + "/comm")
			w.execs = append(w.execs, strings.TrimSpace(string(comm)))
		}
	}
}

func (w *processWatcher) close() {
	unix.Close(w.fd)
	<-w.done
}

func itoa(n uint32) string { return strings.TrimSpace(strings.Repeat(" ", 0) + uintString(n)) }

func uintString(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b [10]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
