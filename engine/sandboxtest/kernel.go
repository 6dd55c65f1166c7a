package sandboxtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// Kernel attack surface: what recent kernel privilege escalations went through, reached from
// inside a sandbox. A program makes a user namespace of its own (alone, and with mount and
// network namespaces), in which it would hold every capability over what it made, and mounts
// over /usr; it opens netlink sockets to netfilter and xfrm; it uses its keyrings. Every one of
// these must be refused, on every backend. Each attempt runs in a forked child of the program,
// so one that succeeds cannot change what the next one sees; the child reports as JSON on a
// pipe.

// attemptPrelude gives a program attempt(fn), which runs fn in a forked child and returns what
// it returned, and the constants the cases use.
const attemptPrelude = `import ctypes, json, os, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
NEWUSER, NEWNS, NEWNET, SIGCHLD = 0x10000000, 0x00020000, 0x40000000, 17
CALLS = {"x86_64": {"clone": 56, "clone3": 435, "keyctl": 250, "add_key": 248},
         "aarch64": {"clone": 220, "clone3": 435, "keyctl": 219, "add_key": 217}}.get(platform.machine())
def attempt(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                out = fn()
            except BaseException as e:
                out = "raised %r" % (e,)
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        data += b
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data) if data else "no report"
def refused(ret):
    return "refused %d" % ctypes.get_errno() if ret < 0 else "made"
`

// nestedNamespaces: no user namespace inside the sandbox, by unshare or by clone (clone3 is
// ENOSYS, so libc falls back to clone, whose flags the filter sees), and no mount over /usr
// (tmpfs, overlayfs, bind), with or without one.
func (c *contract) nestedNamespaces(t *testing.T) {
	program := attemptPrelude + `
def unshare(flags):
    def fn():
        if libc.unshare(flags) != 0:
            return "refused %d" % ctypes.get_errno()
        return "made"
    return fn
def clone(nr, flags):
    def fn():
        if CALLS is None:
            return "refused: no clone numbers for " + platform.machine()
        if nr == "clone3":
            # struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, then zeros.
            args = (ctypes.c_uint64 * 11)(flags, 0, 0, 0, SIGCHLD)
            pid = libc.syscall(CALLS["clone3"], ctypes.byref(args), ctypes.c_size_t(88))
        else:
            pid = libc.syscall(CALLS["clone"], ctypes.c_ulong(flags | SIGCHLD), 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        if pid < 0:
            return "refused %d" % ctypes.get_errno()
        os.waitpid(pid, 0)
        return "made"
    return fn
def mounts(flags):
    def fn():
        out = {}
        if flags and libc.unshare(flags) != 0:
            out["unshare"] = "refused %d" % ctypes.get_errno()
        os.makedirs("upper", exist_ok=True)
        os.makedirs("work", exist_ok=True)
        for what, src, fstype, mflags, data in (
                ("tmpfs", b"none", b"tmpfs", 0, b"size=1m"),
                ("overlay", b"overlay", b"overlay", 0, ("lowerdir=/usr,upperdir=%s/upper,workdir=%s/work" % (os.getcwd(), os.getcwd())).encode()),
                ("bind", os.getcwd().encode(), None, 4096, None)):
            ret = libc.mount(src, b"/usr", fstype, mflags, data)
            out[what] = refused(ret)
        return out
    return fn
return {
    "unshare(NEWUSER)": attempt(unshare(NEWUSER)),
    "unshare(NEWUSER|NEWNS)": attempt(unshare(NEWUSER | NEWNS)),
    "unshare(NEWUSER|NEWNET)": attempt(unshare(NEWUSER | NEWNET)),
    "clone(NEWUSER)": attempt(clone("clone", NEWUSER)),
    "clone(NEWUSER|NEWNS|NEWNET)": attempt(clone("clone", NEWUSER | NEWNS | NEWNET)),
    "clone3(NEWUSER)": attempt(clone("clone3", NEWUSER)),
    "mount over /usr": attempt(mounts(0)),
    "mount over /usr in a user and mount namespace": attempt(mounts(NEWUSER | NEWNS)),
}`
	got := c.noneMade(t, program, "the sandbox let a program make a namespace or a mount")
	if s, _ := got["clone3(NEWUSER)"].(string); !strings.HasPrefix(s, "refused 38") {
		t.Errorf("clone3 = %v, want ENOSYS (38), so libc falls back to clone", got["clone3(NEWUSER)"])
	}
	t.Logf("%v", got)
}

// noneMade runs program, whose value is a map from each attempt to what came of it, and
// reports what (with the attempts that were not refused, and all of them) when any was not
// refused. It returns the map.
func (c *contract) noneMade(t *testing.T, program, what string) map[string]any {
	t.Helper()
	r := c.run(t, program, engine.Limits{})
	wantOK(t, r)
	var got map[string]any
	value(t, r, &got)
	if made := madeAny(got); len(made) > 0 {
		t.Errorf("%s: %v (all: %v)", what, made, got)
	}
	return got
}

// madeAny lists the keys of got (nested maps included) whose value says an attempt succeeded
// or reported nothing: anything but a refusal.
func madeAny(got map[string]any) []string {
	var out []string
	for k, v := range got {
		switch v := v.(type) {
		case map[string]any:
			for _, m := range madeAny(v) {
				out = append(out, k+": "+m)
			}
		case string:
			if !strings.HasPrefix(v, "refused") {
				out = append(out, k+" "+v)
			}
		default:
			out = append(out, fmt.Sprintf("%s %v", k, v))
		}
	}
	return out
}

// netlink: no netlink socket to netfilter (nf_tables answered a dump to a container) or xfrm,
// nor to audit or the kernel's uevents; nor through a user and network namespace of the
// program's own.
func (c *contract) netlink(t *testing.T) {
	program := attemptPrelude + `
PROTOS = {"NETLINK_NETFILTER": 12, "NETLINK_XFRM": 6, "NETLINK_AUDIT": 9, "NETLINK_KOBJECT_UEVENT": 15}
def open_all(flags):
    def fn():
        out = {}
        if flags and libc.unshare(flags) != 0:
            out["unshare"] = "refused %d" % ctypes.get_errno()
        for name, proto in PROTOS.items():
            try:
                s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto)
                out[name] = "made"
                s.close()
            except OSError as e:
                out[name] = "refused %d" % e.errno
        return out
    return fn
return {"sockets": attempt(open_all(0)), "in a user and network namespace": attempt(open_all(NEWUSER | NEWNET))}`
	t.Logf("%v", c.noneMade(t, program, "the sandbox let a program open netlink sockets to kernel subsystems"))
}

// keyctl: the keyring calls themselves are refused (keyctl, add_key), not only a key's
// reading by a later execution: they reach keyrings and a key quota every process of the
// host uid shares.
func (c *contract) keyctl(t *testing.T) {
	program := attemptPrelude + `
def calls():
    if CALLS is None:
        return {"keyctl": "refused: no keyring numbers for " + platform.machine()}
    out = {}
    for name, args in (("get session keyring", (0, -3, 1)), ("get user keyring", (0, -4, 1)),
                       ("join a named session keyring", (1, b"mcp-sandbox-test"))):
        out["keyctl " + name] = refused(libc.syscall(CALLS["keyctl"], *args))
    out["add_key"] = refused(libc.syscall(CALLS["add_key"], b"user", b"mcp-sandbox-test", b"x", 1, -3))
    return out
return attempt(calls)`
	c.noneMade(t, program, "the sandbox let a program use the keyring calls")
}

// tenantKeyring: what the review did on containers. Tenant alpha's execution makes a named
// keyring, links it into its uid's user keyring and adds a key to it; tenant beta's later
// execution looks for the keyring by name and for the key, and reads what it finds. beta
// reads nothing, and alpha could make nothing that outlived it.
func (c *contract) tenantKeyring(t *testing.T) {
	secret, name := "key-"+token(), "mcp-sandbox-test-"+token()
	head := fmt.Sprintf("SECRET = %q.encode()\nNAME = %q.encode()\n", secret, name) + attemptPrelude
	writer := head + `
def write():
    if CALLS is None:
        return {"keyctl": "refused: no keyring numbers for " + platform.machine()}
    out = {}
    ring = libc.syscall(CALLS["keyctl"], 1, NAME)  # KEYCTL_JOIN_SESSION_KEYRING
    out["named keyring"] = refused(ring)
    if ring >= 0:
        out["linked into the user keyring"] = refused(libc.syscall(CALLS["keyctl"], 8, ring, -4))  # KEYCTL_LINK
    key = libc.syscall(CALLS["add_key"], b"user", NAME, SECRET, len(SECRET), ring if ring >= 0 else -4)
    out["key"] = refused(key)
    return out
return attempt(write)`
	reader := head + `
def read():
    if CALLS is None:
        return {}
    got = {}
    def content(serial):
        buf = ctypes.create_string_buffer(256)
        n = libc.syscall(CALLS["keyctl"], 11, serial, buf, 256)  # KEYCTL_READ
        return buf.raw[:max(n, 0)]
    ring = libc.syscall(CALLS["keyctl"], 10, -4, b"keyring", NAME, 0)  # KEYCTL_SEARCH
    if ring >= 0:
        got["named keyring in the user keyring"] = True
        libc.syscall(CALLS["keyctl"], 9, ring, -4)  # KEYCTL_UNLINK
    joined = libc.syscall(CALLS["keyctl"], 1, NAME)
    if joined >= 0:
        key = libc.syscall(CALLS["keyctl"], 10, joined, b"user", NAME, 0)
        got["key through the named keyring"] = key >= 0 and content(key) == SECRET
    key = libc.syscall(CALLS["keyctl"], 10, -4, b"user", NAME, 0)
    if key >= 0:
        got["key in the user keyring"] = content(key) == SECRET
        libc.syscall(CALLS["keyctl"], 21, key)  # KEYCTL_INVALIDATE
    return got
return attempt(read)`
	run := func(owner, program string) map[string]any {
		t.Helper()
		r := c.sb.Run(context.Background(), engine.Execution{Program: program, Owner: owner,
			Terms: engine.Terms{Isolation: c.cfg.Level, Network: c.network()}})
		if r == nil {
			t.Fatal("Run returned nil")
		}
		wantOK(t, r)
		var v map[string]any
		value(t, r, &v)
		return v
	}
	wrote := run("tenant-alpha", writer)
	read := run("tenant-beta", reader)
	if made := madeAny(wrote); len(made) > 0 {
		t.Errorf("tenant alpha's execution made keyring state that outlives it: %v", made)
	}
	if f := found(read); len(f) > 0 {
		t.Errorf("tenant beta's execution read what tenant alpha's left in a keyring: %v (alpha: %v)", f, wrote)
	}
}

// foreignABI: the refusals hold through the i386 entry point (int 0x80), which a filter
// written for x86-64 numbers never sees: a new user namespace, a netfilter socket, a keyring.
// A call refused by the runtime's killing the caller (a container profile's bad-architecture
// action) counts as refused: the attempt's child reports nothing.
func (c *contract) foreignABI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		gate.AppliesOnly(t, false, "the probe is x86-64 machine code")
	}
	program := attemptPrelude + `import mmap
def int80(nr, a, b, c):
    def fn():
        le = lambda v: list((v & 0xffffffff).to_bytes(4, "little"))
        code = bytes([0xb8] + le(nr) + [0xbb] + le(a) + [0xb9] + le(b) + [0xba] + le(c) + [0xcd, 0x80, 0xc3])
        buf = mmap.mmap(-1, len(code), prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        buf.write(code)
        ret = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()
        return "refused %d" % -ret if ret < 0 else "made"
    return fn
got = {}
for name, call in (("unshare(NEWUSER)", (310, NEWUSER, 0, 0)), ("socket(NETLINK_NETFILTER)", (359, 16, 3, 12)),
                   ("keyctl(get session keyring)", (288, 0, -3, 1))):
    r = attempt(int80(*call))
    got[name] = "refused: killed" if r == "no report" else r
return got`
	t.Logf("%v", c.noneMade(t, program, "a call through the i386 ABI passed the policy"))
}
