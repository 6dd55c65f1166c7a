# mcp-sandbox template: forks one sandbox child per request. See engine/backend/namespaces/doc.go.
# argv: CANARY PORT4 PORT6 MAXVALUE WORKSPACE SECCOMP_HEX LANDLOCK_HEX. The control socket is fd 3; the host
# sends the bootstrap's text on it first (8 bytes of length, then the text), so that no
# template's command line reads as a sandbox child's (only the bootstrap's first line does).
# It never receives program text, environment values or tool results: only descriptors and
# fixed numeric fields. The policies it installs, the seccomp program and the Landlock ruleset
# (launch.LandlockRuleset), were built in Go: this file only makes the system calls.
import ctypes
import os
import resource
import _signal  # the signal module without its enums: fewer objects touched a child (design §19.8)
import socket
import stat
import struct
import sys
import time

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS = 1, 4, 22, 38
_CLONE_NEWNS, _CLONE_NEWPID = 0x20000, 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
_REQUEST = struct.Struct("<12q")  # id uid gid cpu cpu_hard as fsize nproc nofile ws_bytes tmp_bytes tag
_REPLY = struct.Struct("<2q")  # id, the child's pid here (or -errno)


def _ok(r, what):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def _prctl(op, a=0):
    _ok(_libc.prctl(ctypes.c_int(op), ctypes.c_ulong(a), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl %d" % op)


def _mount(src, target, fstype, flags, data):
    _ok(_libc.mount(src, target.encode(), fstype, ctypes.c_ulong(flags), data.encode() if data else None), "mount " + target)


_prctl(_PR_SET_DUMPABLE, 0)  # execve reset it: no process of the pool's uid opens this one's memory
# Every mount here private once, so every child's copy of this namespace is private from its
# unshare on: no child remounts the whole tree (design §19.8).
_mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
_workspace, _filter, _ruleset = sys.argv[5], bytes.fromhex(sys.argv[6]), bytes.fromhex(sys.argv[7])
sys.argv = ["-c"] + sys.argv[1:5] + ["cold"]
# landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: one number on every arch.
_SYS_LL_CREATE, _SYS_LL_ADD, _SYS_LL_RESTRICT, _LL_RULE_PATH_BENEATH = 444, 445, 446, 1


def _parse_ruleset(b):
    """The ruleset's handled file accesses, scopes and rules (dir access, file access, path)."""
    if not b:
        return None
    fs, scopes = struct.unpack_from("<QQ", b)
    rules, off = [], 16
    while off < len(b):
        d, f, n = struct.unpack_from("<QQH", b, off)
        off += 18
        rules.append((d, f, b[off:off + n]))
        off += n
    return fs, scopes, rules


_landlock = _parse_ruleset(_ruleset)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# Go's seccomp program as prctl(PR_SET_SECCOMP) reads it, built once: every child inherits it.
_filter_buf = ctypes.create_string_buffer(_filter, len(_filter))
_fprog = _Fprog(len(_filter) // 8, ctypes.addressof(_filter_buf))


def _syscall(nr, *args):
    r = _libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, bytes) else ctypes.c_long(a) for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, "system call %d: %s" % (nr, os.strerror(e)))
    return r


def _rule(path, d, f):
    """A rule's path opened (O_PATH) and its access for what the path is, or None when this
    root lacks it, as the exec'd helper passes such a path over."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    return fd, struct.pack("<Qi", d if stat.S_ISDIR(os.fstat(fd).st_mode) else f, fd)


# Each child mounts its own workspace, /tmp and /proc, and a rule on a mount point does not
# reach a filesystem mounted there later: those rules are made in the child, after its mounts.
# Every other path is the same in each child's mount namespace (a copy of this one), so it is
# opened once here, and a child only hands the descriptors to the kernel.
_own_mounts = (_workspace.encode(), b"/tmp", b"/proc")
_static_rules = []
if _landlock is not None:
    for _d, _f, _path in _landlock[2]:
        if _path not in _own_mounts:
            _r = _rule(_path, _d, _f)
            if _r is not None:
                _static_rules.append(_r)
_static_fds = {fd for fd, _ in _static_rules}
_static_attrs = tuple(attr for _, attr in _static_rules)


# landlock_add_rule's fixed arguments, converted once (design §19.8).
_c_add, _c_path_beneath, _c_zero = ctypes.c_long(_SYS_LL_ADD), ctypes.c_long(_LL_RULE_PATH_BENEATH), ctypes.c_long(0)


def _add_rules(ruleset, attrs):
    """landlock_add_rule for each path_beneath attribute in attrs."""
    add, rs = _libc.syscall, ctypes.c_long(ruleset)
    for attr in attrs:
        if add(_c_add, rs, _c_path_beneath, attr, _c_zero) < 0:
            e = ctypes.get_errno()
            raise OSError(e, "landlock_add_rule: %s" % os.strerror(e))


def _restrict():
    """Installs Go's Landlock ruleset on this process, now that its mounts exist."""
    fs, scopes, rules = _landlock
    ruleset = _syscall(_SYS_LL_CREATE, struct.pack("<QQQ", fs, 0, scopes), 24, 0)
    try:
        _add_rules(ruleset, _static_attrs)
        for d, f, path in rules:
            if path not in _own_mounts:
                continue
            r = _rule(path, d, f)
            if r is not None:
                try:
                    _add_rules(ruleset, (r[1],))
                finally:
                    os.close(r[0])
        _syscall(_SYS_LL_RESTRICT, ruleset, 0)
    finally:
        os.close(ruleset)


def _read_exactly(n):
    data = b""
    while len(data) < n:
        chunk = os.read(3, n - len(data))
        if not chunk:
            os._exit(0)
        data += chunk
    return data


_source = _read_exactly(struct.unpack("<q", _read_exactly(8))[0]).decode()
# unshare(CLONE_NEWPID) needs the namespace for children to be this process's own: after each
# fork into a new one, setns back (design §5.3).
_own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
_B = {"__name__": "__mcp_sandbox_bootstrap__", "__builtins__": __builtins__}
_body = _source.rstrip()
if not _body.endswith("_main()"):
    os.write(2, b"mcp-sandbox-template: the bootstrap does not end with _main()\n")
    os._exit(125)
exec(compile(_body[: -len("_main()")], "<bootstrap>", "exec"), _B)
for _name in ("asyncio", "traceback", "linecache"):  # what a warm child would import, once for all
    try:
        __import__(_name)
    except Exception:
        pass
# A program's first compile through the AST makes the AST's node types: once here, for all.
_B["_compile"]("6*7")
# fork(2) itself, called with the GIL held, not os.fork: a child skips Python's after-fork
# work, whose at-fork hooks (threading's and logging's, which asyncio imports; the
# bootstrap's) reset threads and locks this one-threaded template never has, and cost a
# child more CPU, most of it copy-on-write faults, than any step of its set-up (design §19.8).
_fork = ctypes.PyDLL(None, use_errno=True).fork


# The status pipe of each live child, by its pid here: the template is each child's parent and
# reports its end (launch.Status), as an exec'd child's init does.
_status = {}


def _reap(signum, frame):
    """Reaps every child that has ended and writes its status: its wait status, its CPU time
    (its descendants' included: every process of its namespace was reaped into it when it
    ended) and its CPUCLOCK_PROF reading, what RLIMIT_CPU counts, taken from the zombie."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        pid = info.si_pid
        if pid not in _status:
            return  # being filed now, under a blocked SIGCHLD: its own signal comes once it is
        try:
            rlimit_cpu = time.clock_gettime((~pid) << 3)
        except OSError:
            rlimit_cpu = 0.0
        try:
            _, ws, ru = os.wait4(pid, 0)
        except ChildProcessError:
            continue  # a handler that interrupted this one reaped it
        fd = _status.pop(pid)
        code, sig = (-1, os.WTERMSIG(ws)) if os.WIFSIGNALED(ws) else (os.WEXITSTATUS(ws), 0)
        try:
            os.write(fd, ('{"code":%d,"signal":%d,"cpu":%r,"rlimit_cpu":%r}' % (
                code, sig, ru.ru_utime + ru.ru_stime, rlimit_cpu)).encode())
        except OSError:
            pass
        os.close(fd)


def _closeexcept(keep, low):
    """Close every descriptor from low up but those in keep."""
    start = low
    for fd in sorted(k for k in keep if k >= low) + [1 << 20]:
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1


def _child(req, fds):
    """The child: pid 1 of a pid namespace of its own, the program's interpreter. It builds its
    mounts, waits for the host to join it to its cgroup, drops to its identity, installs its
    confinement and runs the bootstrap's main. It shares the template's network, IPC and UTS
    namespaces: the seccomp program refuses every socket but AF_UNIX, SysV IPC and message
    queues, Landlock scopes its abstract sockets and signals, and it holds no capability to
    rename a host (design §4.4)."""
    chan, out, err, status, go = fds
    _closeexcept({chan, out, err, go} | _static_fds, 3)  # siblings' status pipes and the control socket too
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
    os.setsid()  # a process group of its own: kill(0, ...) reaches nothing of the template's
    _, uid, gid, cpu, cpu_hard, as_, fsize, nproc, nofile, ws_bytes, tmp_bytes, tag = req
    _ok(_libc.unshare(ctypes.c_int(_CLONE_NEWNS)), "unshare")  # a copy of the template's: private
    _mount(b"tmpfs", _workspace, b"tmpfs", _MS_NOSUID | _MS_NODEV,
           "size=%d,mode=0755,uid=%d,gid=%d" % (max(ws_bytes, 1 << 20), uid, gid))
    _mount(b"tmpfs", "/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, "size=%d,mode=1777" % max(tmp_bytes, 1 << 20))
    _mount(b"proc", "/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
    # The host joins this process to the execution's cgroup, then says go: one byte.
    if os.read(go, 1) != b"\x01":
        os._exit(125)
    os.close(go)
    home = "%s/%016x" % (_workspace, tag & (1 << 64) - 1)
    os.dup2(chan, 3)
    os.dup2(out, 1)
    os.dup2(err, 2)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    _closeexcept(_static_fds, 4)
    os.setgroups([gid])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # to a uid other than 0: every capability goes
    _prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    for res, soft, hard in ((resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_CPU, cpu, max(cpu, cpu_hard)),
                            (resource.RLIMIT_AS, as_, as_), (resource.RLIMIT_FSIZE, fsize, fsize),
                            (resource.RLIMIT_NPROC, nproc, nproc), (resource.RLIMIT_NOFILE, nofile, nofile)):
        if hard > 0 or res == resource.RLIMIT_CORE:
            resource.setrlimit(res, (soft, hard))
    os.mkdir(home, 0o755)  # a name of its own, in its own tmpfs: no workspace path is reused
    os.chdir(home)
    os.environ["HOME"] = os.environ["TMPDIR"] = home
    if _landlock is not None:
        _restrict()
    os.closerange(4, 1 << 20)  # the rules' paths: nothing but fds 0-3 reaches the program
    _ok(_libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(2), ctypes.byref(_fprog), ctypes.c_ulong(0), ctypes.c_ulong(0)), "seccomp")
    _B["_main"]()
    os._exit(0)


def _serve():
    ctl = socket.socket(fileno=3)
    _signal.signal(_signal.SIGCHLD, _reap)
    import gc

    gc.collect()
    gc.freeze()
    os.write(3, ("ready %s" % sys.version.split()[0]).ljust(32).encode())
    while True:
        msg, fds, _, _ = socket.recv_fds(ctl, _REQUEST.size, 8)
        if not msg:
            os._exit(0)  # the host closed the control socket: retire
        if len(msg) != _REQUEST.size or len(fds) != 5:
            os._exit(125)  # not the host's protocol
        req = _REQUEST.unpack(msg)
        # SIGCHLD waits until the child's status pipe is filed under its pid: a child that
        # ends at once is reaped with its status written, never before.
        _signal.pthread_sigmask(_signal.SIG_BLOCK, (_signal.SIGCHLD,))
        try:
            _ok(_libc.unshare(ctypes.c_int(_CLONE_NEWPID)), "unshare")
            pid = _fork()
            if pid < 0:
                raise OSError(ctypes.get_errno(), "fork")
        except OSError as e:
            pid = -(e.errno or 1)
        if pid == 0:
            try:
                _child(req, fds)
            except BaseException as e:  # noqa: a setup step failed: say which, nothing ran
                try:
                    os.write(2, ("mcp-sandbox-init: %s\n" % e).encode())
                except OSError:
                    pass
            os._exit(125)
        status = fds[3]
        for fd in fds:
            if fd != status or pid < 0:
                os.close(fd)
        if pid > 0:
            _status[pid] = status
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (_signal.SIGCHLD,))
        if _libc.setns(ctypes.c_int(_own_pid_ns), ctypes.c_int(_CLONE_NEWPID)) != 0:
            os._exit(125)  # every later fork would fail
        if pid < 0:
            ctl.sendall(_REPLY.pack(req[0], pid))
            continue
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(ctl, [_REPLY.pack(req[0], pid)], [pidfd])
        finally:
            os.close(pidfd)


_serve()
