#!/usr/bin/env bash
# A Windows CPython for the Wine tests (cmd/mcp-sandbox/wine_test.go): python-build-standalone's
# windows-amd64 install, as github.com/kluctl/go-embed-python carries it, fetched through the Go
# module proxy (`go mod download`, into a module cache of this script's own that it removes
# again: the module is 154 MB and no dependency of ours) and unpacked, its gzipped files
# inflated as its files.json lists them, into DEST/VERSION. Prints the directory holding
# python.exe. Idempotent: an unpacked version (its .complete marker) is used as it is.
#
#   .ci/wine/python.sh [DEST]     DEST defaults to /var/cache/mcp-sandbox-ci/winpython
#
# MCP_SANDBOX_WINE_PYTHON_MODULE picks another version of the module (3.14 is the default;
# v0.0.0-3.11.11-20241219-1 is the fallback should a newer one not run under Wine).
set -euo pipefail
version=${MCP_SANDBOX_WINE_PYTHON_MODULE:-v0.0.0-3.14.6-20260610-1}
dest=${1:-/var/cache/mcp-sandbox-ci/winpython}
target=$dest/$version
if [ -f "$target/.complete" ]; then
	echo "$target"
	exit 0
fi
scratch=$(mktemp -d)
cleanup() {
	[ -d "$scratch/mod" ] && GOMODCACHE="$scratch/mod" go clean -modcache 2>/dev/null || true
	rm -rf "$scratch"
}
trap cleanup EXIT
printf 'module winpython\n\ngo 1.26\n' >"$scratch/go.mod"
(cd "$scratch" && GOMODCACHE="$scratch/mod" GOFLAGS=-mod=mod go mod download -json \
	"github.com/kluctl/go-embed-python@$version") >"$scratch/download.json"
rm -rf "$target" && mkdir -p "$target"
python3 - "$scratch/download.json" "$target" <<'PY'
import gzip, json, os, shutil, sys

module = json.load(open(sys.argv[1]))
src = os.path.join(module["Dir"], "python", "internal", "data", "windows-amd64")
dst = sys.argv[2]
listing = json.load(open(os.path.join(src, "files.json")))
n = 0
for f in listing["files"]:
    name = f["name"]
    out = os.path.join(dst, *name.split("/"))
    if f["perm"] & 0x80000000:  # Go's fs.ModeDir
        os.makedirs(out, exist_ok=True)
        continue
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if f.get("compressed"):
        with gzip.open(os.path.join(src, name + ".gz"), "rb") as r, open(out, "wb") as w:
            shutil.copyfileobj(r, w)
    else:
        shutil.copyfile(os.path.join(src, name), out)
    if os.path.getsize(out) != f["size"]:
        sys.exit("%s: %d bytes, files.json says %d" % (name, os.path.getsize(out), f["size"]))
    n += 1
if not os.path.isfile(os.path.join(dst, "python.exe")):
    sys.exit("no python.exe among the %d files" % n)
print("unpacked %d files of %s %s" % (n, module["Path"], module["Version"]), file=sys.stderr)
PY
touch "$target/.complete"
echo "$target"
