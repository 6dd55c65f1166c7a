#!/usr/bin/env bash
# Builds the container backend's image from this host's Python, without pulling anything:
# assembles a root filesystem (the interpreter, the shared libraries it and its extension
# modules load, the standard library, a passwd naming nobody) and imports it with the
# container runtime's `import`. Usage:
#
#   build.sh RUNTIME PYTHON IMAGE TAG...     e.g. build.sh podman /usr/bin/python3 localhost/mcp-sandbox-python 1.2.3 latest
#
# The image has no shell, no package manager and no entrypoint: the backend names the
# interpreter it runs. Nothing in it is needed at build time but this host's files.
set -euo pipefail

if [ $# -lt 4 ]; then
	echo "usage: $0 RUNTIME PYTHON IMAGE TAG..." >&2
	exit 2
fi
runtime=$1 python=$2 image=$3
shift 3

command -v "$runtime" >/dev/null || { echo "$0: no $runtime on PATH (apt-get install podman)" >&2; exit 1; }
python=$(command -v "$python") || { echo "$0: no interpreter $2" >&2; exit 1; }
real=$(readlink -f "$python")

# Where the interpreter keeps its standard library and extension modules.
read -r stdlib dynload < <("$python" -I -S -c 'import sysconfig; print(sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib") + "/lib-dynload")')

root=$(mktemp -d "${TMPDIR:-/tmp}/mcp-sandbox-image-XXXXXX")
trap 'rm -rf "$root"' EXIT

# Merged /usr as on the host: /bin, /lib, /lib64 and /sbin are links into /usr when they are here.
for d in bin lib lib64 sbin; do
	if [ -L "/$d" ]; then
		target=$(readlink "/$d")
		mkdir -p "$root/${target#/}"
		ln -s "$target" "$root/$d"
	fi
done
mkdir -p "$root"/{etc,tmp,workspace,run/mcp-sandbox,proc,dev,sys,usr/bin}
chmod 1777 "$root/tmp"

# copy PATH: the file at PATH (links followed) lands at PATH in the root; a link at PATH
# whose target differs is kept as a link too, so both names resolve.
copy() {
	local src=$1
	mkdir -p "$root$(dirname "$src")"
	if [ -L "$src" ] && [ ! -e "$root$src" ]; then
		local target
		target=$(readlink -f "$src")
		copy "$target"
		ln -s "$target" "$root$src"
	elif [ ! -e "$root$src" ]; then
		cp -L --preserve=mode "$src" "$root$src"
	fi
}

copy "$real"
[ "$python" = "$real" ] || ln -sf "$real" "$root$python"
[ -e "$root/usr/bin/python3" ] || ln -s "$real" "$root/usr/bin/python3"

# The standard library, links dereferenced (Debian links sitecustomize.py into /etc), without
# what a sandboxed program cannot use: tests, IDLE, Tk, pip's bootstrap, build configuration.
mkdir -p "$root$stdlib"
tar -C "$stdlib" --dereference --exclude=./test --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo \
	--exclude=./ensurepip --exclude='./config-*' --exclude=./site-packages --exclude=./dist-packages -cf - . |
	tar -C "$root$stdlib" -xf -
if [ "$dynload" != "$stdlib/lib-dynload" ] && [ -d "$dynload" ]; then
	mkdir -p "$root$dynload" && cp -rL "$dynload/." "$root$dynload/"
fi

# Every shared library the interpreter and its extension modules load, and the loader.
libs() {
	ldd "$@" 2>/dev/null | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}' | sort -u
}
for lib in $(libs "$real" "$dynload"/*.so); do copy "$lib"; done
# glibc's companion libraries, which nothing above links but a program may load (ctypes, or
# code written before glibc 2.34 folded them into libc).
libcdir=$(dirname "$(libs "$real" | grep -m1 '/libc\.so')")
for lib in libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 libresolv.so.2 libanl.so.1 libcrypt.so.1; do
	if [ -e "$libcdir/$lib" ]; then copy "$libcdir/$lib"; fi
done

printf 'root:x:0:0:root:/:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

# Smoke test before importing: the interpreter starts in the root and imports what the
# bootstrap needs.
if command -v chroot >/dev/null && [ "$(id -u)" = 0 ]; then
	chroot "$root" "$real" -I -c 'import _json, _socket, resource, asyncio, subprocess, threading, json, ctypes; ctypes.CDLL("librt.so.1")' ||
		{ echo "$0: the assembled root cannot run $real" >&2; exit 1; }
fi

first=$1
tar -C "$root" --numeric-owner -cf - . | "$runtime" import --change 'WORKDIR /workspace' - "$image:$first" >/dev/null
for tag in "${@:2}"; do "$runtime" tag "$image:$first" "$image:$tag"; done
echo "built $image:$first$(printf ' %s' "${@:2}" | sed "s|  *\([^ ]\)| $image:\1|g") from $real ($(du -sh "$root" | cut -f1))"
