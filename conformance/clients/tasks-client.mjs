// A client of MCP tasks on the official TypeScript SDK v2 (@modelcontextprotocol/client) and
// its tasks package (@modelcontextprotocol/ext-tasks), on revision 2025-11-25 (core tasks) or
// 2026-07-28 (the io.modelcontextprotocol/tasks extension, whose wire shapes the SDK's own
// request path cannot carry: the package sends them through rawDispatch, here a fetch). It starts
// two run_code programs as tasks: the first (--long) it follows to its end, recording each
// status it polls; the second (--cancel) it cancels once it runs. It prints one JSON object
// for the Go test to check.
//
//   node tasks-client.mjs --protocol 2025-11-25|2026-07-28 --url URL --token T --long CODE --cancel CODE
const argv = process.argv.slice(2);
const opts = {};
for (let i = 0; i < argv.length; i++) opts[argv[i].replace(/^--/, "")] = argv[++i];

const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
const { createTaskSessionFromClient, resultFromTaskOutcome } = await import("@modelcontextprotocol/ext-tasks/client");

const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
  requestInit: { headers: { Authorization: `Bearer ${opts.token}` } },
});
const clientInfo = { name: "tasks-client", version: "0" };
const modern = opts.protocol === "2026-07-28";
const client = new Client(clientInfo, modern
  ? { versionNegotiation: { mode: { pin: opts.protocol } } }
  : { supportedProtocolVersions: [opts.protocol] });

// rawDispatch sends one request of the extension as JSON-RPC over HTTP and returns its answer.
let nextId = 1;
async function rawDispatch(request, options) {
  const res = await fetch(opts.url, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      Authorization: `Bearer ${opts.token}`,
      "MCP-Protocol-Version": opts.protocol,
      // The standard headers of 2026-07-28 (SEP-2243), which its servers check against the body.
      "Mcp-Method": request.method,
      ...(request.method === "tools/call" ? { "Mcp-Name": request.params.name } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, ...request }),
    signal: options?.signal,
  });
  const text = await res.text();
  let msg;
  if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    for (const line of text.split("\n")) {
      if (!line.startsWith("data: ")) continue;
      const m = JSON.parse(line.slice(6));
      if (m.id !== undefined) msg = m;
    }
  } else {
    msg = JSON.parse(text);
  }
  return msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
}

let session;
try {
  await client.connect(transport);
  const tools = await client.listTools();
  session = createTaskSessionFromClient(client, {
    endpointId: "mcp-sandbox-conformance",
    ...(modern ? {
      rawDispatch,
      v2RequestFraming: { protocolVersion: opts.protocol, clientInfo, clientCapabilities: {} },
    } : {}),
  });
  const task = { preference: "require" };
  let started = Date.now();
  const long = await session.callTool("run_code", { code: opts.long }, { task });
  const startedMs = Date.now() - started;
  const killed = await session.callTool("run_code", { code: opts.cancel }, { task });

  // The second runs: cancel it once its status says so.
  const kc = session.task(killed.handle.taskId);
  for (let i = 0; i < 100; i++) {
    const v = await kc.snapshot();
    if (v.status === "working" && /running/.test(v.statusMessage ?? "")) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await killed.cancel();
  const killedOutcome = await killed.result();

  const statuses = [];
  const { outcome } = await long.settle({
    onEvent: (e) => { if (e.type === "task") statuses.push(e.task.status); },
  });
  const result = outcome.status === "completed" ? resultFromTaskOutcome(outcome) : null;
  console.log(JSON.stringify({
    protocol: transport.protocolVersion ?? null,
    task_support: tools.tools.find((t) => t.name === "run_code")?.execution?.taskSupport ?? null,
    generation: client.getProtocolEra() ?? null,
    long_kind: long.kind,
    killed_kind: killed.kind,
    started_ms: startedMs,
    statuses,
    outcome: outcome.status,
    structured: result?.structuredContent ?? null,
    killed_outcome: killedOutcome.status,
  }));
} catch (err) {
  console.error("tasks-client:", err);
  process.exitCode = 1;
} finally {
  await session?.close();
  await client.close();
}
