// A real MCP client on the official TypeScript SDK: v1 (@modelcontextprotocol/sdk) or, with
// --sdk v2, v2 (@modelcontextprotocol/client, which checks a result's structuredContent against
// the tool's outputSchema). It lists the tools, calls run_code, and prints one JSON object for
// the Go test to check.
//
//   node ts-client.mjs [--sdk v2] --url URL [--token T] [--code C]
//   node ts-client.mjs [--sdk v2] [--code C] [--call no] [--connect-timeout-ms MS] -- COMMAND ARGS...
//
// --connect-timeout-ms bounds initialize (the SDK's 60 s by default): a server started
// through `make run` answers it only once its first build is done.
const argv = process.argv.slice(2);
const opts = { code: "6*7", sdk: "v1" };
let command = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--") { command = argv.slice(i + 1); break; }
  opts[argv[i].replace(/^--/, "")] = argv[++i];
}

const { Client, StdioClientTransport, StreamableHTTPClientTransport } = opts.sdk === "v2"
  ? { ...(await import("@modelcontextprotocol/client")), ...(await import("@modelcontextprotocol/client/stdio")) }
  : {
    ...(await import("@modelcontextprotocol/sdk/client/index.js")),
    ...(await import("@modelcontextprotocol/sdk/client/stdio.js")),
    ...(await import("@modelcontextprotocol/sdk/client/streamableHttp.js")),
  };

let transport;
if (opts.url) {
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } });
} else if (command.length > 0) {
  transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" });
} else {
  console.error("ts-client: need --url or a command after --");
  process.exit(2);
}

const client = new Client({ name: "ts-client", version: "0" });
try {
  await client.connect(transport, opts["connect-timeout-ms"] ? { timeout: Number(opts["connect-timeout-ms"]) } : undefined);
  const tools = await client.listTools();
  // --call no: list the tools only.
  const res = opts.call === "no" ? { content: [] }
    : await client.callTool({ name: "run_code", arguments: { code: opts.code } });
  const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
  console.log(JSON.stringify({
    protocol: transport.protocolVersion ?? null,
    tools: tools.tools.map((t) => t.name),
    is_error: res.isError ?? false,
    text,
    structured: res.structuredContent ?? null,
    report: res._meta?.["mcp-sandbox/report"] ?? null,
  }));
} catch (err) {
  console.error("ts-client:", err);
  process.exitCode = 1;
} finally {
  await client.close();
}
