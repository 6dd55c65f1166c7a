// A client of MCP tasks on the official TypeScript SDK v2 (@modelcontextprotocol/client) and
// its tasks package (@modelcontextprotocol/ext-tasks), on revision 2025-11-25 (core tasks) or
// 2026-07-28 (the io.modelcontextprotocol/tasks extension, whose wire shapes the SDK's own
// request path cannot carry: the package sends them through rawDispatch, here a fetch). It starts
// two run_code programs as tasks: the first (--long) it follows to its end, recording each
// status it polls; the second (--cancel) it cancels once it runs. On 2026-07-28, --ask runs a
// program whose call needs a person's approval: the question comes through the task (an input
// request of the input_required task) and the person here accepts it (tasks/update); with
// --ask-operator the person never answers, and the client, as the operator, approves it on the
// operator route (--operator-token) instead. It prints one JSON object for the Go test to check.
//
//   node tasks-client.mjs --protocol 2025-11-25|2026-07-28 --url URL --token T --long CODE --cancel CODE
//        [--ask CODE --ask-operator CODE --operator-token T]
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

// The person: each question put, and how it came. A question of a program the operator is to
// answer is left open until the task's input lifetime ends (the execution is detached once the
// task ended), so nothing is sent for it.
const asked = [];
let operatorStatus = null;
async function onInputRequest(request, context) {
  asked.push({ kind: request.kind, delivery: context.delivery, input_id: context.inputId ?? null, message: request.params?.message ?? "" });
  if (!context.applicationContext?.operator) return { action: "accept" };
  const res = await fetch(new URL(`/v1/approvals/${context.inputId}/approve`, opts.url), {
    method: "POST",
    headers: { Authorization: `Bearer ${opts["operator-token"]}` },
  });
  operatorStatus = res.status;
  await new Promise((resolve) => {
    if (context.signal === undefined || context.signal.aborted) return resolve();
    context.signal.addEventListener("abort", resolve, { once: true });
  });
  return { action: "cancel" };
}

// structuredOf is a completed outcome's structured result, or null.
const structuredOf = (outcome) => outcome.status === "completed" ? resultFromTaskOutcome(outcome)?.structuredContent ?? null : null;

let session;
try {
  await client.connect(transport);
  const tools = await client.listTools();
  session = createTaskSessionFromClient(client, {
    endpointId: "mcp-sandbox-conformance",
    onInputRequest,
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

  // A question through the task, accepted by the person.
  let ask = null;
  if (opts.ask) {
    const exec = await session.callTool("run_code", { code: opts.ask }, { task });
    const { outcome: o } = await exec.settle();
    ask = { kind: exec.kind, outcome: o.status, structured: structuredOf(o) };
  }
  // A question through the task, answered on the operator route instead.
  let byOperator = null;
  if (opts["ask-operator"]) {
    const exec = await session.callTool("run_code", { code: opts["ask-operator"] }, { task, applicationContext: { operator: true } });
    const o = await session.task(exec.handle.taskId).result();
    await exec.detach();
    byOperator = { kind: exec.kind, outcome: o.status, structured: structuredOf(o), operator_status: operatorStatus };
  }
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
    asked,
    ask,
    by_operator: byOperator,
  }));
} catch (err) {
  console.error("tasks-client:", err);
  process.exitCode = 1;
} finally {
  await session?.close();
  await client.close();
}
