# Runs a command in the network namespace this process was started in (a fresh one the test
# made: CLONE_NEWNET), after setting its loopback interface up; nothing else is there, so no
# byte the command sends can leave the machine. With --serve DIR, DIR is served read-only over
# HTTP on 127.0.0.1:PORT (an npm registry of the test's own tarballs), inside the namespace,
# for as long as the command runs. Exits with the command's status.
#
#   python3 loopback-only.py [--serve DIR PORT] -- COMMAND ARGS...
import fcntl
import functools
import http.server
import socket
import struct
import subprocess
import sys
import threading

SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_RUNNING = 0x1, 0x40


def loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP | IFF_RUNNING))


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory, port):
    handler = functools.partial(QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main(argv):
    args = argv[1:]
    if args[:1] == ["--serve"]:
        directory, port, args = args[1], int(args[2]), args[3:]
    else:
        directory = None
    if args[:1] != ["--"] or len(args) < 2:
        print("usage: loopback-only.py [--serve DIR PORT] -- COMMAND ARGS...", file=sys.stderr)
        return 2
    loopback_up()
    if directory is not None:
        serve(directory, port)
    return subprocess.call(args[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
