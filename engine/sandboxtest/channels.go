package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// Channels between executions: one execution (a tenant's) leaves something in a kernel object
// or a shared directory, and a later or concurrent one (another tenant's) reads it. Each case
// runs the writer, checks from the host that nothing it made outlived it, then runs the
// reader, which also removes whatever it finds so a failing run leaves nothing behind. The
// programs use ctypes so they run on any CPython a backend offers.

// ctypesPrelude gives a program libc and errno, and the keyring system calls by machine.
const ctypesPrelude = `import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
def errno():
    return ctypes.get_errno()
BAD = ctypes.c_void_p(-1).value
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]
KEYCALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}.get(platform.machine())
def mqlib():
    for lib in (libc, ctypes.CDLL("librt.so.1", use_errno=True)):
        if hasattr(lib, "mq_open"):
            return lib
`

// token returns a fresh random hex string.
func token() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// twoRuns runs writer then reader (each with SECRET, KEY and NAME defined), with check called
// from the host in between; it returns both values.
func (c *contract) twoRuns(t *testing.T, secret string, key int, name, writer, reader string, between func()) (map[string]any, map[string]any) {
	t.Helper()
	head := fmt.Sprintf("SECRET = %q.encode()\nKEY = %d\nNAME = %q\n", secret, key, name) + ctypesPrelude
	r := c.run(t, head+writer, engine.Limits{})
	wantOK(t, r)
	var wrote, read map[string]any
	value(t, r, &wrote)
	between()
	r = c.run(t, head+reader, engine.Limits{})
	wantOK(t, r)
	value(t, r, &read)
	return wrote, read
}

func found(read map[string]any) []string {
	var out []string
	for k, v := range read {
		if v == true {
			out = append(out, k)
		}
	}
	return out
}

func (c *contract) sysvIPC(t *testing.T) {
	secret, key := "sysv-"+token(), int(time.Now().UnixNano()%1_000_000_000)+1
	writer := `IPC_CREAT, IPC_NOWAIT = 0o1000, 0o4000
res = {}
shm = libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
if shm >= 0:
    addr = libc.shmat(shm, None, 0)
    if addr and addr != BAD:
        ctypes.memmove(addr, SECRET, len(SECRET))
        res["shm"] = "written"
    else:
        res["shm"] = "attach refused %d" % errno()
else:
    res["shm"] = "refused %d" % errno()
q = libc.msgget(KEY, IPC_CREAT | 0o666)
if q >= 0:
    m = Msg(1, SECRET)
    res["msg"] = "written" if libc.msgsnd(q, ctypes.byref(m), len(SECRET), IPC_NOWAIT) == 0 else "send refused %d" % errno()
else:
    res["msg"] = "refused %d" % errno()
sem = libc.semget(KEY, 1, IPC_CREAT | 0o666)
if sem >= 0:
    res["sem"] = "written" if libc.semctl(sem, 0, 16, 4242) == 0 else "setval refused %d" % errno()
else:
    res["sem"] = "refused %d" % errno()
return res`
	reader := `IPC_NOWAIT, IPC_RMID, SHM_RDONLY = 0o4000, 0, 0o10000
got = {}
shm = libc.shmget(KEY, 0, 0)
if shm >= 0:
    addr = libc.shmat(shm, None, SHM_RDONLY)
    got["shm"] = bool(addr and addr != BAD and ctypes.string_at(addr, len(SECRET)) == SECRET)
    libc.shmctl(shm, IPC_RMID, None)
q = libc.msgget(KEY, 0)
if q >= 0:
    m = Msg()
    n = libc.msgrcv(q, ctypes.byref(m), 64, 0, IPC_NOWAIT)
    got["msg"] = n > 0 and m.mtext[:n] == SECRET
    libc.msgctl(q, IPC_RMID, None)
sem = libc.semget(KEY, 1, 0)
if sem >= 0:
    got["sem"] = libc.semctl(sem, 0, 12) == 4242
    libc.semctl(sem, 0, IPC_RMID)
return got`
	var left []string
	wrote, read := c.twoRuns(t, secret, key, "", writer, reader, func() { left = sysvLeft(key) })
	removeSysV(key)
	if len(left) > 0 {
		t.Errorf("SysV objects outlived the execution that made them (%v), pinning host memory: %v", wrote, left)
	}
	if f := found(read); len(f) > 0 {
		t.Errorf("a later execution read what an earlier one left in SysV %v (the writer: %v)", f, wrote)
	}
}

func (c *contract) keyring(t *testing.T) {
	secret, desc := "key-"+token(), "mcp-sandbox-test-"+token()
	writer := `if KEYCALLS is None:
    return {"add_key": "no keyring calls known for " + platform.machine()}
serial = libc.syscall(KEYCALLS[0], b"user", NAME.encode(), SECRET, len(SECRET), -4)
return {"add_key": serial if serial >= 0 else "refused %d" % errno()}`
	reader := `if KEYCALLS is None:
    return {}
got = {}
for how, serial in (("search", libc.syscall(KEYCALLS[2], 10, -4, b"user", NAME.encode(), 0)),
                    ("request_key", libc.syscall(KEYCALLS[1], b"user", NAME.encode(), None, 0))):
    if serial >= 0:
        buf = ctypes.create_string_buffer(256)
        n = libc.syscall(KEYCALLS[2], 11, serial, buf, 256)
        got[how] = n > 0 and buf.raw[:n] == SECRET
        libc.syscall(KEYCALLS[2], 21, serial)
return got`
	wrote, read := c.twoRuns(t, secret, 0, desc, writer, reader, func() {})
	if f := found(read); len(f) > 0 {
		t.Errorf("a later execution read a key an earlier one added to the uid's keyring (%v; the writer: %v)", f, wrote)
	}
	if _, ok := wrote["add_key"].(float64); ok {
		t.Errorf("an execution could add a key to a keyring that outlives it: %v", wrote)
	}
}

func (c *contract) posixShared(t *testing.T) {
	secret, name := "shm-"+token(), "mcp-sandbox-test-"+token()
	paths := []string{"/dev/shm/" + name, "/tmp/" + name, "/var/tmp/" + name}
	writer := fmt.Sprintf(`res = {}
for p in %s:
    try:
        with open(p, "wb") as f:
            f.write(SECRET)
        res[p] = "written"
    except OSError as e:
        res[p] = "refused: %%s" %% e.strerror
lib = mqlib()
if lib is None:
    res["mq"] = "no mq_open"
else:
    q = lib.mq_open(("/" + NAME).encode(), os.O_CREAT | os.O_RDWR, ctypes.c_uint(0o666), None)
    if q >= 0:
        res["mq"] = "written" if lib.mq_send(q, SECRET, len(SECRET), 0) == 0 else "send refused %%d" %% errno()
    else:
        res["mq"] = "refused %%d" %% errno()
return res`, pyList(paths))
	reader := fmt.Sprintf(`got = {}
for p in %s:
    try:
        with open(p, "rb") as f:
            got[p] = f.read() == SECRET
        os.unlink(p)
    except OSError:
        pass
lib = mqlib()
if lib is not None:
    q = lib.mq_open(("/" + NAME).encode(), os.O_RDONLY | os.O_NONBLOCK)
    if q >= 0:
        buf = ctypes.create_string_buffer(1 << 16)
        n = lib.mq_receive(q, buf, 1 << 16, None)
        got["mq"] = n > 0 and buf.raw[:n] == SECRET
        lib.mq_unlink(("/" + NAME).encode())
return got`, pyList(paths))
	var left []string
	wrote, read := c.twoRuns(t, secret, 0, name, writer, reader, func() {
		for _, p := range append(paths, "/dev/mqueue/"+name) {
			if _, err := os.Lstat(p); err == nil {
				left = append(left, p)
			}
		}
	})
	t.Logf("the writer: %v; the reader: %v", wrote, read)
	for _, p := range left {
		_ = os.Remove(p)
	}
	if len(left) > 0 {
		t.Errorf("files outlived the execution that wrote them, on the host: %v (the writer: %v)", left, wrote)
	}
	if f := found(read); len(f) > 0 {
		t.Errorf("a later execution read what an earlier one left in %v (the writer: %v)", f, wrote)
	}
}

func pyList(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// concurrent: while one execution listens on an abstract unix socket (for 6 s), another,
// started after it, looks for it by every means a shared kernel offers: the socket (retried
// for 3 s, so a slow start under load does not make the case pass vacuously), /proc, a
// signal, ptrace, its memory. Neither can reach the other, and both complete.
func (c *contract) concurrent(t *testing.T) {
	name := "mcp-sandbox-test-" + token()
	victim := fmt.Sprintf(`import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind("\0" + %q)
    s.listen(1)
except OSError as e:
    return {"bound": str(e), "reached": False}
s.settimeout(6)
try:
    conn, _ = s.accept()
    return {"bound": True, "reached": conn.recv(64).decode(errors="replace")}
except OSError:
    return {"bound": True, "reached": False}`, name)
	attacker := fmt.Sprintf(`import socket, signal
%s
import time
res = {"connected": False, "signalled": [], "ptraced": [], "memory": []}
deadline = time.monotonic() + 3
while not res["connected"] and time.monotonic() < deadline:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(1)
    try:
        c.connect("\0" + %q)
        c.sendall(b"reached")
        res["connected"] = True
    except OSError:
        time.sleep(0.1)
    c.close()
me = os.getpid()
try:
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me and int(p) != os.getppid()]
except OSError:
    pids = []
for pid in pids:
    try:
        with open("/proc/%%d/cmdline" %% pid, "rb") as f:
            if %q.encode() not in f.read():
                continue
    except OSError:
        continue
    if libc.ptrace(16, pid, None, None) == 0:
        res["ptraced"].append(pid)
        libc.ptrace(17, pid, None, None)
    try:
        with open("/proc/%%d/mem" %% pid, "rb") as f:
            f.read(1)
        res["memory"].append(pid)
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
        res["signalled"].append(pid)
    except OSError:
        pass
return res`, ctypesPrelude, name, bootstrapMarker)
	var (
		wg sync.WaitGroup
		vr *engine.Outcome
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		vr = c.sb.Run(context.Background(), engine.Execution{Program: victim,
			Terms: engine.Terms{Isolation: c.cfg.Level, Network: engine.NetworkNone}})
	}()
	time.Sleep(1500 * time.Millisecond) // the victim is listening by now
	ar := c.run(t, attacker, engine.Limits{})
	wg.Wait()
	wantOK(t, ar)
	var got struct {
		Connected bool  `json:"connected"`
		Signalled []int `json:"signalled"`
		Ptraced   []int `json:"ptraced"`
		Memory    []int `json:"memory"`
	}
	value(t, ar, &got)
	if got.Connected || len(got.Signalled) > 0 || len(got.Ptraced) > 0 || len(got.Memory) > 0 {
		t.Errorf("an execution reached a concurrent one: %+v", got)
	}
	if vr == nil || vr.Failure != nil {
		t.Fatalf("the concurrent execution did not complete: %+v", vr)
	}
	var v struct {
		Reached any `json:"reached"`
	}
	value(t, vr, &v)
	if v.Reached != false {
		t.Errorf("the concurrent execution was reached through its abstract socket: %v", v.Reached)
	}
}

// sysvLeft lists the SysV objects with key in this host's IPC namespace (the host's view from
// /proc/sysvipc): what an execution left behind.
func sysvLeft(key int) []string {
	var out []string
	for _, kind := range []string{"shm", "msg", "sem"} {
		b, err := os.ReadFile(filepath.Join("/proc/sysvipc", kind))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 && f[0] == strconv.Itoa(key) {
				out = append(out, kind)
			}
		}
	}
	return out
}
