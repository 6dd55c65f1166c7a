// A client of MCP tasks on the official TypeScript SDK v2 (@modelcontextprotocol/client) and
// its tasks package (@modelcontextprotocol/ext-tasks), pinned to revision 2025-11-25. It starts
// two run_code programs as tasks: the first (--long) it follows to its end, recording each
// status it polls; the second (--cancel) it cancels once it runs. It prints one JSON object
// for the Go test to check.
//
//   node tasks-client.mjs --url URL --token T --long CODE --cancel CODE
const argv = process.argv.slice(2);
const opts = {};
for (let i = 0; i < argv.length; i++) opts[argv[i].replace(/^--/, "")] = argv[++i];

const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
const { createTaskSessionFromClient, resultFromTaskOutcome } = await import("@modelcontextprotocol/ext-tasks/client");

const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
  requestInit: { headers: { Authorization: `Bearer ${opts.token}` } },
});
const client = new Client({ name: "tasks-client", version: "0" }, { supportedProtocolVersions: ["2025-11-25"] });
let session;
try {
  await client.connect(transport);
  const tools = await client.listTools();
  session = createTaskSessionFromClient(client, { endpointId: "mcp-sandbox-conformance" });
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
