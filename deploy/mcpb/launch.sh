#!/bin/sh
# mcp-sandbox's launcher in the MCP Bundle, for macOS and Linux: it runs this machine's
# binary, server/<os>-<arch>/mcp-sandbox, with the arguments it was given. Windows starts
# server/windows-amd64/mcp-sandbox.exe directly (manifest.json's platform_overrides).
dir=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd) || exit 1
case $(uname -s) in
Darwin) os=darwin ;;
Linux) os=linux ;;
*) echo "mcp-sandbox: this bundle has no binary for $(uname -s)" >&2; exit 1 ;;
esac
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
arm64 | aarch64) arch=arm64 ;;
*) echo "mcp-sandbox: this bundle has no binary for $(uname -m)" >&2; exit 1 ;;
esac
exec "$dir/$os-$arch/mcp-sandbox" "$@"
