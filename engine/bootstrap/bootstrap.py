# mcp-sandbox bootstrap: runs first in every sandbox child. See engine/bootstrap/doc.go.
# Protocol: engine/wire. Everything here is the child's side; the host trusts none of it.
import os
import sys

_CHAN = 3
_VERSION = 1
_PROGRAM = "<program>"
_canary, _port4, _port6, _max_value = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
_warm = sys.argv[5:6] == ["warm"]  # started ahead of its program: warm up while it waits
_socket_mode = sys.argv[6:8]  # containers: the channel's socket ("-": the standard streams; "tcp:PORT": loopback), and the variables to keep
sys.argv = [_PROGRAM]
_is_child = False  # true in a process the program forked: it must never speak on the channel


def _forked():
    global _is_child
    _is_child = True
    fds = [_CHAN]
    if _streams:  # stream mode's relays live in the parent only
        fds += [_streams[0], _streams[1], _streams[4].detach(), _stdin_fd[0]]
        _streams[:] = []
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(after_in_child=_forked)

# ---- JSON without importing the json package (it costs more than the rest of start-up) ----
try:
    import _json

    def _not_json(o):
        raise TypeError("value of type %s is not JSON-serializable" % type(o).__name__)

    _encoder = _json.make_encoder({}, _not_json, _json.encode_basestring_ascii, None, ":", ",", False, False, False)

    def _dumps(o):
        return "".join(_encoder(o, 0))

    class _Ctx:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = None
        memo = None

    _scanner = _json.make_scanner(_Ctx())

    def _loads(s):
        obj, end = _scanner(s, 0)
        return obj

    _dumps({"probe": [1, 2.5, None, True, "é"]})
    _loads('{"a": [1, "b"]}')
except Exception:  # another CPython: fall back to the json package
    import json as _jsonmod

    def _dumps(o):
        return _jsonmod.dumps(o, allow_nan=False, separators=(",", ":"), default=_not_json)

    _loads = _jsonmod.loads


# Stream mode (containers whose runtime runs them in a VM: a socket on the host does not reach
# them): fd 3 is one end of a socket pair, as in every other mode; two threads relay its other
# end, the host's frames from stdin and this child's frames to the container's stdout. There
# everything this child sends goes as records, each an 8-byte header (stream id, three zero
# bytes, the payload's length as a big-endian uint32: the layout of Docker's attach streams)
# and at most _RECORD bytes: stream 3 carries the wire's frames (an empty one: this child
# closed its channel), stream 1 what the program writes to its fd 1, a pipe forwarded by a
# third thread and the flush paths below. The program's stderr stays the container's. _streams
# is [stdout's fd, the pipe's read end, the pair's far end, the lock every record is written
# under], empty in the other modes.
_streams = []
_RECORD = 1 << 16
_STDOUT_RECORD, _CHANNEL_RECORD = 1, 3


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_record(stream, data):
    """Callers hold _streams[3]."""
    _write_all(_streams[0], bytes((stream, 0, 0, 0)) + len(data).to_bytes(4, "big") + data)


def _forward_once():
    """Forwards one read of the program's stdout pipe: None when it held nothing, False at
    its end. Callers hold _streams[3]."""
    try:
        data = os.read(_streams[1], _RECORD)
    except BlockingIOError:
        return None
    except OSError:
        return False
    if not data:
        return False
    _write_record(_STDOUT_RECORD, data)
    return True


def _drain_stdout():
    """Forwards what the pipe holds now. Callers hold _streams[3]."""
    while _forward_once():
        pass


def _forward_stdout():
    import select

    p = select.poll()
    p.register(_streams[1], select.POLLIN)
    while True:
        p.poll()
        with _streams[3]:  # one read at a time: frames are not held up by a flood
            if _forward_once() is False:
                return


def _relay_out():
    """This child's frames, from the pair's far end to stdout records; an empty record when
    every holder of fd 3 has closed it."""
    while True:
        try:
            data = os.read(_streams[2], _RECORD)
        except OSError:
            data = b""
        with _streams[3]:
            _write_record(_CHANNEL_RECORD, data)
        if not data:
            return


def _relay_in(far):
    """The host's frames, from stdin to the pair's far end; the end of stdin (the host hung
    up) shuts down the far end's writing, which fd 3 sees as a hang-up (SIGIO)."""
    import _socket

    while True:
        try:
            data = os.read(_stdin_fd[0], 1 << 16)
        except OSError:
            data = b""
        if not data:
            try:
                far.shutdown(_socket.SHUT_WR)
            except OSError:
                pass
            return
        try:
            _write_all(_streams[2], data)
        except OSError:
            return


_stdin_fd = [0]


def _flush_stdout_records():
    """At a kill: what the program printed goes out before the interpreter ends. The lock is
    taken with a bound (a relay may be blocked writing a record), and then what the pipe holds
    is lost."""
    if _streams and _streams[3].acquire(True, 0.2):
        try:
            _drain_stdout()
        finally:
            _streams[3].release()


# Loopback mode (Windows, where a socket is no file descriptor os.read and os.write take):
# the channel is a TCP connection to the host's loopback listener, held here, and _CHAN its
# socket's number (what a selector watches).
_sock = []


def _chan_read(n):
    if _sock:
        return _sock[0].recv(n)
    return os.read(_CHAN, n)


def _send(frame):
    if _is_child:
        return
    data = (_dumps(frame) + "\n").encode()
    if _sock:
        _sock[0].sendall(data)
    else:
        _write_all(_CHAN, data)


_inbuf = b""


def _recv_blocking():
    global _inbuf
    while b"\n" not in _inbuf:
        chunk = _chan_read(1 << 16)
        if not chunk:
            os._exit(0)  # the host went away: nothing to report to
        _inbuf += chunk
    line, _, _inbuf = _inbuf.partition(b"\n")
    return _loads(line.decode())


def _cannot(what, e):
    """The channel could not be set up: says so on stderr and ends with status 125."""
    os.write(2, ("mcp-sandbox-init: the sandbox child cannot %s: %s\n" % (what, e)).encode())
    os._exit(125)


def _read_token():
    """The execution's token, the first line on stdin (at most 256 bytes): socket, loopback
    and stream modes send it to the host first."""
    token = b""
    while not token.endswith(b"\n") and len(token) < 256:
        chunk = os.read(0, 256 - len(token))
        if not chunk:
            break
        token += chunk
    return token


def _stdin_null():
    """The program's fd 0 becomes /dev/null once the token is read."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _connect(path, keep):
    """Socket mode (containers, engine/wire): the token arrives on stdin, never in argv or the
    environment; it goes first on the socket, which then becomes fd 3 as for every backend. The
    variables the runtime or the image added (HOSTNAME, an image's ENV) are dropped."""
    try:
        import _socket

        token = _read_token()
        _stdin_null()
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(token)
        if s.fileno() != _CHAN:
            os.dup2(s.fileno(), _CHAN)
            s.close()
        else:
            s.detach()
    except OSError as e:
        _cannot("reach the host's channel", e)
    _keep_only(keep)


def _connect_loopback(port, keep):
    """Loopback mode (Windows: engine/backend/jobobject): as socket mode, with a TCP connection
    to the host's listener on 127.0.0.1 in place of a Unix socket. The listener takes the first
    connection that presents this execution's token and no other."""
    global _CHAN
    try:
        import _socket

        token = _read_token()
        _stdin_null()
        s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        s.connect(("127.0.0.1", int(port)))
        s.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        s.sendall(token)
    except (OSError, ValueError) as e:
        _cannot("reach the host's channel", e)
    _sock[:] = [s]
    _CHAN = s.fileno()
    if os.name == "nt":
        # No signal warns of a kill here (the job ends every process at once): what the program
        # prints goes to the pipe line by line, so a kill loses at most a line it had not ended.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(line_buffering=True)
            except Exception:
                pass
    _keep_only(keep)


def _keep_only(keep):
    keep = keep.split(",")
    if os.name == "nt":  # os.environ's names are upper case there
        keep = [k.upper() for k in keep]
    for name in list(os.environ):
        if name not in keep:
            del os.environ[name]


def _attach_streams(keep):
    """Stream mode: the token read from stdin goes first on stdout, as a line of its own;
    then fd 3 is a socket pair's end relayed to stdin and stdout (records), the program's fd 0
    is /dev/null and its fd 1 a pipe forwarded as stdout records."""
    try:
        import _socket
        import _thread

        token = _read_token()
        import fcntl

        # Above fd 3, which is the channel's, and not inherited by the program's children.
        _stdin_fd[0] = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 10)
        out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 10)
        near, far = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        if near.fileno() != _CHAN:
            os.dup2(near.fileno(), _CHAN)
            near.close()
        else:
            near.detach()
        _stdin_null()
        r, w = os.pipe()
        os.dup2(w, 1)
        os.close(w)
        os.set_blocking(r, False)
        _write_all(out, token)
        _streams[:] = [out, r, far.fileno(), _thread.allocate_lock(), far]
        for relay, args in ((_forward_stdout, ()), (_relay_out, ()), (_relay_in, (far,))):
            _thread.start_new_thread(relay, args)
    except OSError as e:
        _cannot("attach its channel to its standard streams", e)
    _keep_only(keep)


# ---- the probe: what containment this child observes, before any program byte arrives ----
def _read_bytes(path, n=-1):
    """A small file's bytes (at most n), read without the io stack's file objects: the probe
    reads its files in every child, and the raw calls cost a forked child less (design §19.8)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        if n >= 0:
            return os.read(fd, n)
        chunks = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


def _probe():
    if os.name == "nt":  # no uids: the child runs as the host's own account (identity unavailable)
        p = {"pid": os.getpid(), "uid": -1, "gid": -1, "groups": []}
    else:
        p = {"pid": os.getpid(), "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups())}
    try:
        _read_bytes(_canary, 1)
        p["canary"] = "readable"
    except FileNotFoundError:
        p["canary"] = "absent"
    except OSError:
        p["canary"] = "unreadable"
    import _socket

    for fam, host, port, made, reached in (
        (_socket.AF_INET, "127.0.0.1", _port4, "inet_socket", "reached_v4"),
        (_socket.AF_INET6, "::1", _port6, "inet6_socket", "reached_v6"),
    ):
        p[made] = p[reached] = False
        try:
            s = _socket.socket(fam, _socket.SOCK_STREAM)
        except OSError:
            continue
        p[made] = True
        try:
            s.settimeout(0.5)
            if port > 0:
                s.connect((host, port))
                p[reached] = True
        except OSError:
            pass
        finally:
            s.close()
    routes = "unknown"
    try:
        v4 = [l.split()[0] for l in _read_bytes("/proc/net/route").splitlines()[1:] if l.strip()]
        v6 = [l.split()[-1] for l in _read_bytes("/proc/net/ipv6_route").splitlines() if l.strip()]
        routes = "some" if any(d != b"lo" for d in v4 + v6) else "none"
    except OSError:
        pass
    p["routes"] = routes
    try:
        import resource as r

        p["rlimits"] = {
            name: list(r.getrlimit(res))
            for name, res in (("cpu", r.RLIMIT_CPU), ("as", r.RLIMIT_AS), ("fsize", r.RLIMIT_FSIZE),
                              ("nproc", r.RLIMIT_NPROC), ("nofile", r.RLIMIT_NOFILE))
        }
    except Exception:
        p["rlimits"] = {}
    p["env"] = sorted(os.environ)
    try:
        p["proc_pids"] = sum(1 for n in os.listdir("/proc") if n.isdigit())
    except OSError:
        p["proc_pids"] = -1
    try:
        fd = os.open(".mcp-sandbox-probe", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        os.unlink(".mcp-sandbox-probe")
        p["workspace_writable"] = True
    except OSError:
        p["workspace_writable"] = False
    p["python"] = sys.version.split()[0]
    p["no_new_privs"], p["seccomp"], p["cap_eff"] = -1, -1, ""
    try:
        st = dict(l.split(b":", 1) for l in _read_bytes("/proc/self/status").splitlines() if b":" in l)
        p["no_new_privs"], p["seccomp"] = int(st[b"NoNewPrivs"]), int(st[b"Seccomp"])
        p["cap_eff"] = st[b"CapEff"].strip().decode("ascii")
    except (OSError, KeyError, ValueError):
        pass
    try:
        if os.name == "nt":  # os.kill there is TerminateProcess: never aimed at anything
            raise ProcessLookupError
        os.kill(1, 0)
        p["init_signal"] = "allowed"
    except PermissionError:
        p["init_signal"] = "refused"
    except OSError:
        p["init_signal"] = "absent"
    # A Landlock domain, seen by what it refuses: opening / for reading, which the permissions
    # allow (access(2), which Landlock does not check, says so), under a ruleset that grants
    # nothing on / itself (a forked child's); no other confinement of ours refuses it.
    if os.name != "nt":
        try:
            if not os.access("/", os.R_OK):
                raise OSError("unknown")
            os.close(os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
            p["landlock_root"] = "allowed"
        except PermissionError:
            p["landlock_root"] = "refused"
        except OSError:
            p["landlock_root"] = "unknown"
        # The limits of its own cgroup, as a container engine in a VM set them where the host
        # cannot look: v2's files, else v1's (-1: none).
        for key, paths in (("cgroup_memory", ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")),
                           ("cgroup_pids", ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"))):
            for path in paths:
                try:
                    v = _read_bytes(path).strip()
                    n = -1 if v == b"max" or int(v) >= 1 << 62 else int(v)
                except (OSError, ValueError):
                    continue
                if n != 0:
                    p[key] = n
                break
    return p


# ---- nothing printed is lost when the program is killed ----
# stdout stays block-buffered (a flush per line costs a system call per line: five times the
# time of a large print), so what a program printed may still be in this interpreter's buffer
# when it is killed. Three kills can be seen coming and flush first:
#   - the host ends the execution (wall clock, cancel): it shuts down its side of the channel,
#     which, armed with O_ASYNC, raises SIGIO here; the handler sees the hang-up, flushes and
#     exits, and the host waits a moment (engine.FlushGrace) for that before it kills the tree.
#   - the CPU limit: RLIMIT_CPU's soft limit raises SIGXCPU a second before the hard limit's
#     SIGKILL; the handler flushes and ends the interpreter with SIGXCPU.
#   - the memory limit as RLIMIT_AS: an ordinary MemoryError, after which _main flushes.
# Not covered, and said so in engine's doc: a cgroup OOM kill (no warning), a program that
# replaces or ignores these handlers or closes the channel, a main thread stuck in C code
# that never returns to the interpreter, and file objects the program keeps to itself.
# Only the small built-in modules are used (the signal package costs milliseconds to import).
def _flush_streams():
    seen = []
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is None or any(stream is s for s in seen):
            continue
        seen.append(stream)
        try:
            stream.flush()
        except Exception:  # a closed stream, or a flush re-entered from inside a write
            pass


_hangup = []  # [poll object watching the channel for the host's hang-up, its event mask]


def _on_hangup(signum, frame):
    if _is_child or not _hangup:
        return
    try:
        hung_up = any(ev & _hangup[1] for _, ev in _hangup[0].poll(0))
    except Exception:
        return
    if hung_up:  # not a result frame arriving: the host has ended the execution
        _flush_streams()
        _flush_stdout_records()
        os._exit(0)


def _on_cpu_limit(signum, frame):
    _flush_streams()
    _flush_stdout_records()
    _signal.signal(_signal.SIGXCPU, _signal.SIG_DFL)
    os.kill(os.getpid(), _signal.SIGXCPU)


def _arm_flush_at_kill(chan):
    global _signal
    if os.name == "nt":  # no SIGIO, SIGXCPU or fcntl: stdout is line-buffered there instead
        return
    import _signal
    import fcntl
    import select

    try:
        p = select.poll()
        p.register(chan, select.POLLRDHUP)
        _hangup[:] = [p, select.POLLRDHUP | select.POLLHUP]
        _signal.signal(_signal.SIGXCPU, _on_cpu_limit)
        _signal.signal(_signal.SIGIO, _on_hangup)
        fcntl.fcntl(chan, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(chan, fcntl.F_SETFL, fcntl.fcntl(chan, fcntl.F_GETFL) | os.O_ASYNC)
    except Exception:  # no O_ASYNC here: a kill then loses what is still buffered
        pass


# ---- what the program can call ----
class ToolError(Exception):
    """A tool call that did not produce a result. Branch on .kind, never on the message."""

    def __init__(self, kind, tool, message):
        super().__init__(message)
        self.kind = kind
        self.tool = tool

    def __repr__(self):
        return "ToolError(kind=%r, tool=%r, message=%r)" % (self.kind, self.tool, str(self))


class ToolResultHandle:
    """A result too large to hand over whole: read it in windows on the host."""

    def __init__(self, tool, h):
        self.tool = tool
        self.handle = h["id"]
        self.size = h.get("size", 0)
        self.lines = h.get("lines", 0)

    async def read(self, offset=0, limit=200, pattern=None):
        frame = {"type": "read", "handle": self.handle, "offset": int(offset), "limit": int(limit)}
        if pattern is not None:
            frame["pattern"] = str(pattern)
        return await _request(frame, self.tool)

    def __repr__(self):
        return "ToolResultHandle(tool=%r, handle=%r, size=%d, lines=%d)" % (self.tool, self.handle, self.size, self.lines)


_pending = {}
_next_id = [0]
_reader_loop = [None]


def _on_readable():
    try:
        chunk = _chan_read(1 << 16)
    except OSError:
        chunk = b""
    _take(chunk)


def _answer(fut):
    """Reads the channel until fut, the one call in flight, has its answer (see _idle). What a
    signal handler of the program's raises meanwhile propagates, as it would from the loop's
    poll; a failed read is the channel's end, as for the loop's reader."""
    while not fut.done():
        try:
            chunk = _chan_read(1 << 16)
        except OSError as e:
            if e.errno is None:  # raised by a handler, not by the read
                raise
            chunk = b""
        _take(chunk)


def _take(chunk):
    """Hands the answers in chunk to their calls; an empty chunk is the channel's end."""
    global _inbuf
    if not chunk:
        _reader_loop[0].remove_reader(_CHAN)
        _reader_loop[0] = None
        for fut in _pending.values():
            if not fut.done():
                fut.set_exception(ToolError("cancelled", "", "the host closed the channel"))
        _pending.clear()
        return
    _inbuf += chunk
    while b"\n" in _inbuf:
        line, _, _inbuf = _inbuf.partition(b"\n")
        msg = _loads(line.decode())
        fut = _pending.pop(msg.get("id"), None)
        if fut is not None and not fut.done():
            fut.set_result(msg)


def _idle(loop):
    """Whether loop has nothing to run until the channel is readable: no callback ready, no
    timer, and no file watched but the channel and its own wake-up pipe; and the channel blocks
    (the program may have changed that). A call_soon_threadsafe from another thread (or a
    signal handler of the loop's) then waits for the answer; nothing else can. Anything this
    does not know (another loop) says no."""
    try:
        return not loop._ready and not loop._scheduled and len(loop._selector.get_map()) <= 2 and os.get_blocking(_CHAN)
    except Exception:
        return False


async def _request(frame, tool):
    import asyncio

    if _is_child:
        raise ToolError("unavailable", tool, "tools can be called only from the program's own process")
    loop = asyncio.get_running_loop()
    if _reader_loop[0] is not loop:
        if _reader_loop[0] is not None:
            try:
                _reader_loop[0].remove_reader(_CHAN)
            except Exception:
                pass
        loop.add_reader(_CHAN, _on_readable)
        _reader_loop[0] = loop
    _next_id[0] += 1
    frame["id"] = _next_id[0]
    fut = loop.create_future()
    _pending[frame["id"]] = fut
    try:
        _send(frame)
        if len(_pending) == 1 and _idle(loop):
            # Nothing else could run before the answer: wait for it here, as the loop would,
            # without its two polls and callbacks an await costs.
            _answer(fut)
            msg = fut.result()
        else:
            msg = await fut
    finally:
        _pending.pop(frame["id"], None)
    if msg.get("ok"):
        if msg.get("handle"):
            return ToolResultHandle(tool, msg["handle"])
        return msg.get("value")
    raise ToolError(msg.get("kind", "upstream_error"), tool, msg.get("message", ""))


async def call_tool(name, arguments=None):
    """Call any offered tool by its model-facing name; arguments is a dict."""
    if not isinstance(name, str):
        raise TypeError("call_tool: the tool name must be a string, got %s" % type(name).__name__)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError("call_tool: arguments must be a dict, got %s" % type(arguments).__name__)
    try:
        _dumps(arguments)
    except (TypeError, ValueError) as e:
        raise ToolError("invalid_arguments", name, "arguments are not JSON: %s" % e) from None
    _check_keywords(name, arguments)
    return await _request({"type": "call", "tool": name, "args": arguments}, name)


# name -> {"params": [...], "required": [...], "open": bool}: the keywords each binding takes,
# as the host computed them from the tool's input schema (its get_tool_info python_stub).
_signatures = {}


def _near(word, candidates):
    best, best_d = None, 3
    for c in candidates:
        a, b = word.lower(), c.lower()
        if len(a) > 200 or len(b) > 200:
            continue
        prev = list(range(len(b) + 1))
        for i in range(1, len(a) + 1):
            cur = [i] + [0] * len(b)
            for j in range(1, len(b) + 1):
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            prev = cur
        if prev[-1] < best_d:
            best, best_d = c, prev[-1]
    return best


def _check_keywords(name, arguments):
    """Refuse, before anything is sent, a keyword the tool does not take or a missing required
    one; the host checks the same again."""
    sig = _signatures.get(name)
    if not isinstance(sig, dict):
        return
    params = sig.get("params") or []
    if not sig.get("open"):
        unknown = sorted(str(k) for k in arguments if k not in params)
        if unknown:
            k = unknown[0]
            msg = "%s takes no argument %s" % (name, _dumps(k[:100]))
            near = _near(k, params)
            if near is not None:
                msg += " (did you mean %s?)" % _dumps(near)
            msg += "; it takes " + (", ".join(params) if params else "no arguments")
            raise ToolError("invalid_arguments", name, msg)
    for r in sig.get("required") or []:
        if r not in arguments:
            raise ToolError("invalid_arguments", name, "%s is missing its required argument %s" % (name, _dumps(r[:100])))


async def list_tools(server=None, query=None, cursor=None):
    args = {k: v for k, v in (("server", server), ("query", query), ("cursor", cursor)) if v is not None}
    return await call_tool("list_tools", args)


async def get_tool_info(name):
    return await call_tool("get_tool_info", {"name": name})


async def read_tool_output(handle, offset=None, limit=None, pattern=None):
    if isinstance(handle, ToolResultHandle):
        handle = handle.handle
    args = {k: v for k, v in (("handle", handle), ("offset", offset), ("limit", limit), ("pattern", pattern)) if v is not None}
    return await call_tool("read_tool_output", args)


class _Budget:
    """What is left of this execution's and this Run's binding budgets."""

    async def remaining(self):
        """{"execution": {...}, "run": {...}}, each with calls, transfer_bytes, produced_bytes and
        seconds left (None where no ceiling is set). Asking spends nothing."""
        return await _request({"type": "call", "tool": "budget.remaining", "args": {}}, "budget.remaining")

    def __repr__(self):
        return "<budget: await budget.remaining()>"


def _alias(name):
    async def alias(**arguments):
        return await call_tool(name, arguments)

    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = "Calls the tool %s; keyword arguments are its arguments." % name
    return alias


# ---- compiling the program as the body of an async function ----
class _Return(BaseException):
    def __init__(self, value):
        self.value = value


def _compile(source):
    import _ast

    tree = compile(source, _PROGRAM, "exec", _ast.PyCF_ONLY_AST)

    def loc(new, old):
        for a in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            setattr(new, a, getattr(old, a, None) or (1 if a == "lineno" else 0))
        return new

    def ret(node):
        value = node.value if node.value is not None else loc(_ast.Constant(value=None), node)
        call = loc(_ast.Call(func=loc(_ast.Name(id="__sandbox_return__", ctx=_ast.Load()), node), args=[value], keywords=[]), node)
        return loc(_ast.Raise(exc=call, cause=None), node)

    scopes = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef, _ast.Lambda)

    def walk(node):
        for field in node._fields:
            v = getattr(node, field, None)
            if isinstance(v, list):
                for i, item in enumerate(v):
                    if isinstance(item, _ast.Return):
                        v[i] = ret(item)
                    elif isinstance(item, _ast.AST) and not isinstance(item, scopes):
                        walk(item)
            elif isinstance(v, _ast.AST) and not isinstance(v, scopes):
                walk(v)

    walk(tree)
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = tree.body[-1]
        target = loc(_ast.Name(id="__sandbox_value__", ctx=_ast.Store()), last)
        tree.body[-1] = loc(_ast.Assign(targets=[target], value=last.value), last)
    return compile(tree, _PROGRAM, "exec", _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _format_error(e, source):
    import linecache
    import traceback

    # Every line ends with its newline, the last one included (model-written code seldom has
    # one): traceback places its carets by columns of the line as linecache holds it, and a
    # last line without its newline puts them one column to the right.
    lines = source.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[_PROGRAM] = (len(source), None, lines, _PROGRAM)
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != _PROGRAM:
        tb = tb.tb_next
    if isinstance(e, SyntaxError):
        text = "".join(traceback.format_exception_only(type(e), e))
    elif isinstance(e, ToolError):
        # A call that did not produce a result: where the program made it is what it can fix;
        # the frames below (the binding, call_tool, the channel) are this bootstrap's.
        frames = [f for f in traceback.extract_tb(tb) if f.filename == _PROGRAM]
        text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) + \
            "".join(traceback.format_exception_only(type(e), e))
    else:
        text = "".join(traceback.format_exception(type(e), e, tb))
    err = {"type": type(e).__name__, "message": str(e), "traceback": text}
    if isinstance(e, OSError) and isinstance(e.errno, int):
        err["errno"] = e.errno
    return err


def _arun(coro):
    """Runs the program's coroutine. On Windows the default event loop (proactor) cannot watch
    the channel's socket for the bindings' results; a selector loop can."""
    import asyncio

    if os.name == "nt":
        with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
            return runner.run(coro)
    return asyncio.run(coro)


def _run(frame):
    source = frame["program"]
    tools = tuple(sorted(frame.get("tools") or ()))
    g = {
        "__name__": "__main__",
        "__builtins__": __builtins__,
        "__sandbox_return__": _Return,
        "TOOLS": tools,
        "ToolError": ToolError,
        "ToolResultHandle": ToolResultHandle,
        "call_tool": call_tool,
        "list_tools": list_tools,
        "get_tool_info": get_tool_info,
        "read_tool_output": read_tool_output,
        "budget": _Budget(),
    }
    for name in frame.get("aliases") or ():
        g[name] = _alias(name)
    _signatures.update(frame.get("signatures") or {})
    value = None
    try:
        code = _compile(source)
        try:
            if code.co_flags & 0x80:  # CO_COROUTINE: the program awaits at top level
                _arun(eval(code, g))
            else:
                exec(code, g)
            value = g.get("__sandbox_value__")
        except _Return as r:
            value = r.value
    except BaseException as e:  # noqa: every failure is data, SystemExit included
        if isinstance(e, SystemExit) and e.code in (None, 0):
            value = None
        else:
            return {"type": "done", "ok": False, "error": _format_error(e, source)}
    vtype = None
    try:
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            raise TypeError("a named tuple is an object")
        encoded = _dumps(value)
    except (TypeError, ValueError, RecursionError):
        # Not JSON as it is: converted where a conversion is known (_to_json), else its repr.
        try:
            converted = _to_json(value, [_max_value], 0)
            encoded = _dumps(converted)
        except _TooLarge:
            return _too_large("more than %d bytes of JSON" % _max_value, _type_name(type(value)))
        except MemoryError:
            raise
        except Exception:  # noqa: _NoJSON, or a conversion the program's own code broke
            return _done_repr(value)
        if not isinstance(value, (dict, list)):
            vtype = _type_name(type(value))
        value = converted
    if len(encoded) > _max_value:
        return _too_large("%d bytes of JSON" % len(encoded), vtype)
    done = {"type": "done", "ok": True, "value": value}
    if vtype:
        done["value_type"] = vtype
    return done


def _too_large(size, vtype):
    what = "the value" if not vtype else "the value (%s)" % vtype
    return {"type": "done", "ok": False,
            "error": {"type": "ValueTooLarge", "traceback": "", "not_serializable": True,
                      "message": "%s is %s, over the %d-byte ceiling; return less, or print it" % (what, size, _max_value)}}


class _NoJSON(Exception):
    """A value with no conversion to JSON: its repr goes instead."""


class _TooLarge(Exception):
    """A converted value past the value's ceiling."""


def _type_name(t):
    """A type's name as a program would write it: numpy.ndarray, pandas.DataFrame,
    datetime.datetime, or a class of the program's own by its name."""
    mod, name = getattr(t, "__module__", "") or "", getattr(t, "__qualname__", t.__name__)
    if mod in ("builtins", "__main__"):
        return name
    top = mod.split(".")[0]
    if getattr(sys.modules.get(top), name, None) is t:
        return top + "." + name
    return mod + "." + name


def _spend(budget, n):
    budget[0] -= n
    if budget[0] < 0:
        raise _TooLarge()


def _key(k):
    if isinstance(k, str):
        return str(k)
    if k is None or isinstance(k, (bool, int, float)):
        return _dumps(k)
    v = _to_json(k, [1 << 12], 99)
    if isinstance(v, (str, int, float)):
        return v if isinstance(v, str) else _dumps(v)
    raise _NoJSON()


def _module(name):
    return sys.modules.get(name)


def _to_json(v, budget, depth):
    """v as plain JSON values, for a final value the encoder cannot take as it is: numpy arrays
    and scalars, pandas DataFrames (records) and Series, pydantic models (v1 and v2),
    dataclasses, named tuples, enums, datetimes, dates, times, decimals, UUIDs and paths,
    however nested. A module is looked at only when the program imported it (sys.modules):
    nothing is imported here. budget holds how many bytes of JSON may still be made; past it,
    _TooLarge, before a large array or frame is copied. Anything else is _NoJSON."""
    if depth > 100:
        raise _NoJSON()
    t = type(v)
    if v is None or t is bool:
        _spend(budget, 5)
        return v
    if t is int or t is float:
        if t is float and (v != v or v in (float("inf"), float("-inf"))):
            raise _NoJSON()
        _spend(budget, 8)
        return v
    if t is str:
        _spend(budget, len(v) + 2)
        return v
    if t is dict:
        _spend(budget, 2)
        return {_key(k): _to_json(x, budget, depth + 1) for k, x in v.items()}
    if t is list or t is tuple:
        _spend(budget, 2)
        return [_to_json(x, budget, depth + 1) for x in v]
    if isinstance(v, tuple) and hasattr(t, "_fields"):
        _spend(budget, 2)
        return {str(f): _to_json(x, budget, depth + 1) for f, x in zip(t._fields, v)}
    enum = _module("enum")
    if enum is not None and isinstance(v, enum.Enum):
        return _to_json(v.value, budget, depth + 1)
    np = _module("numpy")
    if np is not None:
        if isinstance(v, np.ndarray):
            _spend(budget, 2 * int(v.size))
            return _to_json(v.tolist(), budget, depth + 1)
        if isinstance(v, np.generic):
            return _to_json(v.item(), budget, depth + 1)
    pd = _module("pandas")
    if pd is not None and isinstance(v, (pd.DataFrame, pd.Series)):
        return _frame(pd, v, budget)
    for c in t.__mro__:
        if c.__name__ == "BaseModel" and c.__module__.startswith("pydantic"):
            if hasattr(v, "model_dump") and not c.__module__.startswith("pydantic.v1"):
                return _to_json(v.model_dump(mode="json"), budget, depth + 1)
            return _to_json(_loads(v.json()), budget, depth + 1)
    dataclasses = _module("dataclasses")
    if dataclasses is not None and dataclasses.is_dataclass(v) and not isinstance(v, type):
        _spend(budget, 2)
        return {f.name: _to_json(getattr(v, f.name), budget, depth + 1) for f in dataclasses.fields(v)}
    dt = _module("datetime")
    if dt is not None and isinstance(v, (dt.datetime, dt.date, dt.time)):
        return _to_json(v.isoformat(), budget, depth + 1)
    for mod, cls in (("decimal", "Decimal"), ("uuid", "UUID"), ("pathlib", "PurePath")):
        m = _module(mod)
        if m is not None and isinstance(v, getattr(m, cls)):
            return _to_json(str(v), budget, depth + 1)
    for base in (str, int, float):
        if isinstance(v, base):  # a subclass the encoder would not take
            return _to_json(base(v), budget, depth)
    raise _NoJSON()


def _frame(pd, v, budget):
    """A DataFrame as records (its index a column first unless it is the default 0..n-1), a
    Series as a list (default index) or an object by index; missing values null, times ISO
    8601, as pandas' to_json writes them."""
    _spend(budget, 2 * int(v.size))
    idx = v.index
    default = isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1 and idx.name is None
    if isinstance(v, pd.DataFrame):
        text = (v if default else v.reset_index()).to_json(orient="records", date_format="iso")
    else:
        text = v.to_json(orient="records" if default else "index", date_format="iso")
    _spend(budget, len(text))
    return _loads(text)


def _done_repr(value):
    """A final value JSON cannot carry (a set, a datetime, a DataFrame) completes the program
    all the same: value null, and its repr, cut to fit a frame, in value_repr. Only a value
    whose repr fails too is value_not_serializable."""
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned %s, not str" % type(text).__name__)
    except BaseException as e:  # noqa: the program's __repr__ may raise anything
        return {"type": "done", "ok": False,
                "error": {"type": type(e).__name__, "traceback": "", "not_serializable": True,
                          "message": "it is not JSON, and repr() of it failed with %s: %s" % (type(e).__name__, e)}}
    if len(text) > _max_value // 6:  # \uXXXX escapes: six bytes of JSON a character at most
        text = text[:_max_value // 6] + "…[repr cut at %d of %d characters]" % (_max_value // 6, len(text))
    return {"type": "done", "ok": True, "value": None, "value_repr": text}


def _warm_up():
    """A warm child's program may be a while coming: load now what programs commonly need
    (asyncio for any await, traceback for a failure), so no execution pays for it."""
    for name in ("asyncio", "traceback", "linecache"):
        try:
            __import__(name)
        except Exception:
            pass


def _main():
    if _socket_mode and _socket_mode[0] == "-":
        _attach_streams(_socket_mode[1])
    elif _socket_mode and _socket_mode[0].startswith("tcp:"):
        _connect_loopback(_socket_mode[0][4:], _socket_mode[1])
    elif _socket_mode:
        _connect(*_socket_mode)
    _send({"type": "hello", "version": _VERSION, "probe": _probe()})
    if _warm:
        _warm_up()
    frame = _recv_blocking()
    if frame.get("type") != "run":
        os._exit(0)  # abort: nothing runs
    _arm_flush_at_kill(_CHAN)
    try:
        done = _run(frame)
    except MemoryError:
        done = {"type": "done", "ok": False, "error": {"type": "MemoryError", "message": "", "traceback": "MemoryError\n"}}
    _flush_streams()
    if not _is_child:
        # Let go of the output streams before saying done: when no other process holds them,
        # the host sees their end at once and knows it has every byte.
        for fd in (1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        if _streams:  # what the pipe holds goes out before done
            with _streams[3]:
                _drain_stdout()
        _send(done)
        # The host collects the workspace now; it closes the channel (or kills the tree) when
        # it is done with it.
        try:
            while _chan_read(1 << 16):
                pass
        except OSError:
            pass
    os._exit(0)


_main()
