// Command mcp-sandbox is the product: an MCP server that offers run_code, and the commands an
// operator uses around it (run, doctor, check, version). It is the only package that reads
// files, flags and the environment; it turns the YAML config into engine, backend and server
// values and wires them together. Logs go to stderr; stdout carries results, or protocol
// bytes only under `serve --transport stdio`.
//
// The first thing main does is dispatch the hidden init-helper subcommand (internal/launch),
// because every local sandbox child is this binary re-executed.
package main
