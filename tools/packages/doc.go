// Command packages makes the packages the package managers of MCP users install, from the
// binaries of make dist's dist/ (docs/design.md §21), pulling nothing and building nothing:
//
//	go run ./tools/packages -dist dist [-npm dist/npm] [-wheels dist/wheels]
//
// -npm DIR stages the npm packages, one directory each, for `npm pack`: the platform packages
// @mcp-sandbox/<os>-<cpu> (the binary, with os and cpu fields so that npm installs only the
// one for its machine) and @mcp-sandbox/mcp-sandbox, whose launcher runs that binary and which
// names them all as optionalDependencies, as esbuild and biome do. No install script: nothing
// is downloaded after install. -wheels DIR writes a Python wheel per platform
// (mcp_sandbox-<version>-py3-none-<tag>.whl) holding the binary as a script, as ruff and uv
// ship theirs: `pip install` or `uvx` puts mcp-sandbox on PATH, and `python -m mcp_sandbox`
// runs it too.
//
// It reads dist/artifacts.json (the binaries by goos and goarch) and dist/metadata.json (the
// version). make npm and make wheel run it, and conformance's TestPackagesOffline. It imports
// the standard library only. It runs no goroutine.
package main
