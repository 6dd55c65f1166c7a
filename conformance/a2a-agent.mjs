// A real A2A agent for the conformance tests, built with the official @a2a-js/sdk (v1.0-native;
// by default serving v0.3 too to clients that ask for it, as a deployed agent does during the
// migration).
//
//   node a2a-agent.mjs        listens on 127.0.0.1 (an ephemeral port, or $PORT) and prints
//                             "listening <port>" on stdout once it accepts connections.
//
// Environment:
//   A2A_AGENT_TOKEN    when set, every request (the card too) needs "Authorization: Bearer <it>".
//   A2A_AGENT_COUNTER  a JSON file counting how many times each skill really ran.
//   A2A_AGENT_METHODS  a JSON file counting the JSON-RPC requests received, as
//                      "<A2A-Version header> <method>".
//   A2A_AGENT_PROTOCOL "1.0": A2A 1.0 only, the SDK's legacy layer off (its default), as a
//                      freshly written agent is; "0.3": the legacy layer on and the card
//                      listing only a 0.3 interface, as an agent not yet migrated; unset:
//                      both, the legacy layer on.
//
// The skill a message is meant for is named by message.metadata.skillId (A2A has no skill
// selector of its own; this is the convention mcp-sandbox documents).
import fs from 'node:fs';
import express from 'express';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const TaskState = { WORKING: 2, COMPLETED: 3, FAILED: 4, CANCELED: 5, INPUT_REQUIRED: 6 };
const Role = { AGENT: 2 };

const stock = { A: 7, B: 0, C: 12 };

const skill = (id, name, description, extra = {}) => ({
  id, name, description, tags: ['test'], examples: [], inputModes: [], outputModes: [],
  securityRequirements: [], ...extra,
});

const skills = [
  skill('stock', 'Stock level', 'Tells how many units of a SKU are in stock.\nSend {"data": {"sku": "A"}}.',
    { examples: ['{"sku": "A"}'] }),
  skill('echo', 'Echo', 'Answers with the text it was sent, upper-cased.'),
  skill('report', 'Report', 'Answers with a text, a data and a file part.'),
  skill('refund', 'Refund', 'Refunds an order (a destructive skill the tests put under approval).'),
  skill('big', 'Big', 'Answers with {"data": {"n": N}} bytes of text, in lines of 100.'),
  skill('fail', 'Fail', 'Always fails.'),
  skill('ask', 'Ask', 'Asks for more input instead of answering.'),
  skill('slow', 'Slow', 'Works for {"data": {"seconds": S}} seconds, then completes.'),
  // Names no MCP tool may have: mcp-sandbox skips them and says so.
  skill('bad name', 'Bad', 'A skill id with a space.'),
  skill('x'.repeat(200), 'Long', 'A skill id of 200 characters.'),
];

function count(name, file = process.env.A2A_AGENT_COUNTER) {
  if (!file) return;
  let m = {};
  try { m = JSON.parse(fs.readFileSync(file, 'utf8')); } catch { /* first count */ }
  m[name] = (m[name] || 0) + 1;
  fs.writeFileSync(file + '.tmp', JSON.stringify(m));
  fs.renameSync(file + '.tmp', file);
}

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });
const data = (value) => ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: '' });

function input(msg) {
  const out = { text: '', data: undefined };
  for (const p of msg.parts || []) {
    if (p.content?.$case === 'text') out.text += p.content.value;
    if (p.content?.$case === 'data') out.data = p.content.value;
  }
  return out;
}

class Executor {
  constructor() { this.cancelled = new Set(); this.running = new Set(); }

  async execute(ctx, bus) {
    const msg = ctx.userMessage;
    const id = msg.metadata?.skillId ?? '';
    count(id || '(none)');
    const { text: t, data: d } = input(msg);
    const status = (state, parts) => ({
      taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined,
      status: {
        state, timestamp: new Date().toISOString(),
        message: parts && { messageId: `${ctx.taskId}-${state}`, contextId: ctx.contextId, taskId: ctx.taskId,
          role: Role.AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] },
      },
    });
    const artifact = (parts) => AgentEvent.artifactUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: `${ctx.taskId}-a`, name: 'answer', description: '', parts, metadata: undefined, extensions: [] },
    });
    const finish = (state, parts) => { bus.publish(AgentEvent.statusUpdate(status(state, parts))); bus.finished(); };
    const reply = (parts) => { // a plain Message, no task
      bus.publish(AgentEvent.message({ messageId: `${ctx.taskId}-r`, contextId: ctx.contextId, taskId: '',
        role: Role.AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] }));
      bus.finished();
    };
    if (id === 'echo') return reply([text(t.toUpperCase())]);
    bus.publish(AgentEvent.task({ id: ctx.taskId, contextId: ctx.contextId, history: [msg], artifacts: [],
      metadata: undefined, status: { state: 1, message: undefined, timestamp: new Date().toISOString() } }));
    switch (id) {
      case 'stock': {
        const sku = d?.sku ?? t.trim();
        if (!(sku in stock)) return finish(TaskState.FAILED, [text(`unknown SKU ${JSON.stringify(sku)}`)]);
        bus.publish(artifact([data({ sku, in_stock: stock[sku] })]));
        return finish(TaskState.COMPLETED);
      }
      case 'report':
        bus.publish(artifact([
          text('report for ' + (t || 'nobody')),
          data({ lines: 2, ok: true }),
          { content: { $case: 'raw', value: Buffer.from('col\n1\n') }, metadata: undefined, filename: 'r.csv', mediaType: 'text/csv' },
        ]));
        return finish(TaskState.COMPLETED);
      case 'refund':
        bus.publish(artifact([text(`refunded ${d?.order ?? t}`)]));
        return finish(TaskState.COMPLETED);
      case 'big': {
        const n = Number(d?.n ?? 1000);
        const line = 'y'.repeat(99) + '\n';
        bus.publish(artifact([text(line.repeat(Math.floor(n / 100)) + 'y'.repeat(n % 100))]));
        return finish(TaskState.COMPLETED);
      }
      case 'fail':
        return finish(TaskState.FAILED, [text('the fail skill failed, as asked')]);
      case 'ask':
        return finish(TaskState.INPUT_REQUIRED, [text('which order?')]);
      case 'slow': {
        bus.publish(AgentEvent.statusUpdate(status(TaskState.WORKING)));
        const until = Date.now() + 1000 * Number(d?.seconds ?? 1);
        this.running.add(ctx.taskId);
        try {
          while (Date.now() < until) {
            if (this.cancelled.has(ctx.taskId)) return finish(TaskState.CANCELED, [text('cancelled')]);
            await new Promise((r) => setTimeout(r, 50));
          }
        } finally {
          this.running.delete(ctx.taskId);
        }
        bus.publish(artifact([text('done')]));
        return finish(TaskState.COMPLETED);
      }
      default:
        return finish(TaskState.FAILED, [text(`no skill ${JSON.stringify(id)}`)]);
    }
  }

  // A running task ends itself when it sees the mark; any other (one waiting for input) is
  // cancelled here.
  async cancelTask(taskId, bus) {
    count('(cancel)');
    if (this.running.has(taskId)) {
      this.cancelled.add(taskId);
      return;
    }
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', metadata: undefined,
      status: { state: TaskState.CANCELED, message: undefined, timestamp: new Date().toISOString() } }));
    bus.finished();
  }
}

const protocol = process.env.A2A_AGENT_PROTOCOL || 'both';
if (!['1.0', '0.3', 'both'].includes(protocol)) throw new Error(`A2A_AGENT_PROTOCOL=${protocol}`);
const legacyCompat = { enabled: protocol !== '1.0' };

const app = express();
const token = process.env.A2A_AGENT_TOKEN;
if (token) {
  app.use((req, res, next) => {
    if (req.get('authorization') !== `Bearer ${token}`) return res.status(401).json({ error: 'unauthorized' });
    next();
  });
}

if (process.env.A2A_AGENT_METHODS) {
  app.use('/a2a/jsonrpc', express.json(), (req, res, next) => {
    count(`${req.get('a2a-version') ?? '(none)'} ${req.body?.method}`, process.env.A2A_AGENT_METHODS);
    next();
  });
}

const server = app.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: 'Inventory agent', description: 'A test agent for mcp-sandbox.', version: '1.0.0',
    supportedInterfaces: [
      { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' },
      { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
    ].filter((i) => protocol === 'both' || i.protocolVersion === protocol),
    provider: undefined,
    capabilities: { streaming: false, pushNotifications: false, extensions: [] },
    securitySchemes: {}, securityRequirements: [],
    defaultInputModes: ['text/plain', 'application/json'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills, signatures: [],
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler, legacyCompat }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
  process.stdout.write(`listening ${server.address().port}\n`);
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
