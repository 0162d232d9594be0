#!/usr/bin/env node
// Interop server on @modelcontextprotocol/sdk 1.x (handshake era; speaks
// 2025-11-25 and the older revisions the SDK supports).
//   node server_sdk1.mjs --transport streamable-http|sse|stdio --host 127.0.0.1 --port N [--e2e] [--tasks]
// --e2e adds the tools of tests/e2e/test_sdk_*.py (concurrent asks, asks by declared
// capability, URL elicitation, a call that waits for its cancellation); --tasks turns
// on the SDK's experimental tasks (an in-memory store, the task tool `slow_task`).
// Packages resolve through ./node_modules -> <repo>/.peers/node/node_modules
// (symlink created by ./install).
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import {
  isInitializeRequest,
  ListResourcesRequestSchema,
  McpError,
  ElicitResultSchema,
  CreateMessageResultSchema,
  ListRootsResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import {
  parseArgs, pkgVersion, PNG_BASE64, BINARY_BASE64, NAMES, MANY, paginate,
} from './lib/common.mjs';

const SDK_VERSION = pkgVersion('@modelcontextprotocol/sdk');
const log = (...a) => process.stderr.write(`[server_sdk1] ${a.join(' ')}\n`);
// Set in main(): --e2e registers the end-to-end test tools below, --tasks the
// experimental task support (off by default so the interop matrix sees the plain server).
const OPTS = { e2e: false, tasks: false };
const TASKS = new InMemoryTaskStore(); // shared by every session, like the SDK's example

function buildServer() {
  const capabilities = { logging: {}, completions: {} };
  if (OPTS.tasks) capabilities.tasks = { list: {}, cancel: {}, requests: { tools: { call: {} } } };
  const mcp = new McpServer(
    { name: 'interop-node-sdk1', version: SDK_VERSION },
    OPTS.tasks ? { capabilities, taskStore: TASKS, taskMessageQueue: new InMemoryTaskMessageQueue() } : { capabilities },
  );
  if (OPTS.e2e) registerE2eTools(mcp);
  if (OPTS.tasks) registerTaskTools(mcp);
  const text = (t) => ({ content: [{ type: 'text', text: t }] });

  mcp.registerTool('echo', { description: 'Echo text', inputSchema: { text: z.string() } },
    async ({ text: t }) => text(`echo: ${t}`));

  mcp.registerTool('add', {
    description: 'Add two integers',
    inputSchema: { a: z.number().int(), b: z.number().int() },
    outputSchema: { sum: z.number().int() },
  }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } }));

  mcp.registerTool('image', { description: 'A tiny PNG', inputSchema: {} },
    async () => ({ content: [{ type: 'image', data: PNG_BASE64, mimeType: 'image/png' }] }));

  mcp.registerTool('fail', { description: 'Always fails', inputSchema: {} },
    async () => ({ isError: true, content: [{ type: 'text', text: 'this tool always fails' }] }));

  mcp.registerTool('ask_name', { description: 'Elicit a name', inputSchema: {} }, async (_args, extra) => {
    const r = await extra.sendRequest({
      method: 'elicitation/create',
      params: {
        mode: 'form',
        message: 'What is your name?',
        requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      },
    }, ElicitResultSchema);
    return r.action === 'accept' && r.content?.name !== undefined
      ? text(`hello ${r.content.name}`) : text(`no name (${r.action})`);
  });

  mcp.registerTool('summarize', { description: 'Summarize via sampling', inputSchema: { text: z.string() } },
    async ({ text: t }, extra) => {
      const r = await extra.sendRequest({
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: t } }], maxTokens: 50 },
      }, CreateMessageResultSchema);
      const c = Array.isArray(r.content) ? r.content[0] : r.content;
      return text(`summary: ${c?.type === 'text' ? c.text : JSON.stringify(c)}`);
    });

  mcp.registerTool('show_roots', { description: 'List client roots', inputSchema: {} }, async (_a, extra) => {
    const r = await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema);
    return text(r.roots.map((x) => x.uri).join(','));
  });

  mcp.registerTool('progress', { description: 'Report progress', inputSchema: { steps: z.number().int() } },
    async ({ steps }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        if (token !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress: i, total: steps, message: `step ${i}` },
          });
        }
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'working' } });
        await new Promise((r) => setTimeout(r, 10));
      }
      return text(`done ${steps}`);
    });

  mcp.registerResource('text', 'demo://text', { mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'hello resource' }] }));
  mcp.registerResource('binary', 'demo://binary', { mimeType: 'application/octet-stream' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'application/octet-stream', blob: BINARY_BASE64 }] }));
  for (let i = 0; i < MANY; i++) {
    mcp.registerResource(`many-${i}`, `demo://many/${i}`, { mimeType: 'text/plain' },
      async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: `many ${i}` }] }));
  }
  mcp.registerResource('item', new ResourceTemplate('demo://items/{id}', { list: undefined }), { mimeType: 'text/plain' },
    async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: `item ${id}` }] }));

  mcp.registerPrompt('greet', {
    description: 'Greet someone',
    argsSchema: { name: completable(z.string(), (v) => NAMES.filter((n) => n.startsWith(v ?? ''))) },
  }, ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}!` } }] }));

  // Pagination: McpServer lists everything in one page; wrap its handler (the
  // low-level Server lets us replace it) and serve 10 per page.
  const inner = mcp.server._requestHandlers.get('resources/list');
  mcp.server.setRequestHandler(ListResourcesRequestSchema, async (req, extra) => {
    const all = (await inner({ ...req, params: { ...(req.params ?? {}), cursor: undefined } }, extra)).resources;
    try {
      const { page, next } = paginate(all, req.params?.cursor);
      return next === undefined ? { resources: page } : { resources: page, nextCursor: next };
    } catch (e) {
      throw new McpError(-32602, e.message);
    }
  });
  return mcp;
}

// ----- end-to-end test tools (--e2e) -----
const ELICIT_NAME = {
  mode: 'form',
  message: 'What is your name?',
  requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
};
const SAMPLE = { messages: [{ role: 'user', content: { type: 'text', text: 'say something' } }], maxTokens: 20 };
const elicit = (extra, params = ELICIT_NAME) => extra.sendRequest({ method: 'elicitation/create', params }, ElicitResultSchema);
const sample = (extra) => extra.sendRequest({ method: 'sampling/createMessage', params: SAMPLE }, CreateMessageResultSchema);
const roots = (extra) => extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema);
const sampled = (r) => { const c = Array.isArray(r.content) ? r.content[0] : r.content; return c?.type === 'text' ? c.text : JSON.stringify(c); };
const named = (r) => (r.action === 'accept' ? r.content?.name : r.action);

// Calls waiting for cancellation: tag -> { requestId, reason } once aborted; waiters by tag.
const ABORTED = new Map();
const ABORT_WAITERS = new Map();
function noteAbort(tag, requestId, reason) {
  ABORTED.set(tag, { requestId, reason: reason === undefined ? null : String(reason) });
  for (const wake of ABORT_WAITERS.get(tag) ?? []) wake();
  ABORT_WAITERS.delete(tag);
}
const within = (ms, promise) => Promise.race([promise, new Promise((r) => setTimeout(r, ms))]);

function registerE2eTools(mcp) {
  const text = (t) => ({ content: [{ type: 'text', text: t }] });
  // Three questions at once: the client must see all three before answering any.
  mcp.registerTool('ask_three', { description: 'Elicit, sample and list roots concurrently', inputSchema: {} },
    async (_a, extra) => {
      const [e, m, r] = await Promise.all([elicit(extra), sample(extra), roots(extra)]);
      return text(`name=${named(e)}; sample=${sampled(m)}; roots=${r.roots.map((x) => x.uri).join(',')}`);
    });
  // Asks for exactly what this session's client declared, in a fixed order.
  mcp.registerTool('ask_declared', { description: 'Ask whatever the client declared', inputSchema: {} },
    async (_a, extra) => {
      const caps = mcp.server.getClientCapabilities() ?? {};
      const asked = [];
      if (caps.elicitation) asked.push(`elicitation:${named(await elicit(extra))}`);
      if (caps.sampling) asked.push(`sampling:${sampled(await sample(extra))}`);
      if (caps.roots) asked.push(`roots:${(await roots(extra)).roots.length}`);
      return text(`declared=${Object.keys(caps).sort().join(',')}; ${asked.join('; ')}`);
    });
  mcp.registerTool('ask_url', { description: 'URL-mode elicitation', inputSchema: { id: z.string() } },
    async ({ id }, extra) => {
      const r = await elicit(extra, { mode: 'url', message: 'Sign in, please', url: `https://example.com/login/${id}`, elicitationId: id });
      return text(`url elicitation ${id}: ${r.action}`);
    });
  // Runs until cancelled (30 s at most): progress says it started; the abort is recorded by tag.
  mcp.registerTool('wait_cancel', { description: 'Wait for cancellation', inputSchema: { tag: z.string() } },
    async ({ tag }, extra) => {
      const token = extra._meta?.progressToken;
      const aborted = new Promise((r) => extra.signal.addEventListener('abort', r, { once: true }));
      if (token !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: 1, message: 'started' } });
      }
      await within(30000, aborted);
      if (extra.signal.aborted) noteAbort(tag, extra.requestId, extra.signal.reason);
      return text(extra.signal.aborted ? `cancelled ${tag}` : `not cancelled ${tag}`);
    });
  // What wait_cancel(tag) saw: its own request id and the reason, once aborted (10 s at most).
  mcp.registerTool('aborted', { description: 'Report a cancellation', inputSchema: { tag: z.string() } },
    async ({ tag }) => {
      if (!ABORTED.has(tag)) {
        await within(10000, new Promise((r) => ABORT_WAITERS.set(tag, [...(ABORT_WAITERS.get(tag) ?? []), r])));
      }
      return { content: [{ type: 'text', text: JSON.stringify(ABORTED.get(tag) ?? null) }], structuredContent: { seen: ABORTED.get(tag) ?? null } };
    });
}

// ----- experimental tasks (--tasks) -----
function registerTaskTools(mcp) {
  // Completes after `ms` unless cancelled first; its result names the input.
  mcp.experimental.tasks.registerToolTask('slow_task', {
    description: 'A task that completes after ms milliseconds',
    inputSchema: { ms: z.number().int(), word: z.string() },
    execution: { taskSupport: 'optional' },
  }, {
    async createTask({ ms, word }, { taskStore, taskRequestedTtl }) {
      const task = await taskStore.createTask({ ttl: taskRequestedTtl ?? 60000, pollInterval: 50 });
      setTimeout(async () => {
        const now = await taskStore.getTask(task.taskId).catch(() => undefined);
        if (now?.status !== 'working') return; // cancelled meanwhile
        await taskStore.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `slow ${word}` }] }).catch(() => {});
      }, ms);
      return { task };
    },
    async getTask(_args, { taskId, taskStore }) { return await taskStore.getTask(taskId); },
    async getTaskResult(_args, { taskId, taskStore }) { return await taskStore.getTaskResult(taskId); },
  });
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const s = Buffer.concat(chunks).toString('utf8');
  return s ? JSON.parse(s) : undefined;
}

function httpError(res, status, message, code = -32000) {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function main() {
  const args = parseArgs(process.argv.slice(2), { transport: 'stdio', host: '127.0.0.1', port: '8000', e2e: 'false', tasks: 'false' });
  OPTS.e2e = args.e2e === 'true';
  OPTS.tasks = args.tasks === 'true';
  if (args.transport === 'stdio') {
    const mcp = buildServer();
    await mcp.connect(new StdioServerTransport());
    log('stdio ready');
    return;
  }
  if (!['streamable-http', 'sse'].includes(args.transport)) throw new Error(`unknown transport ${args.transport}`);
  // Both HTTP transports are served on every HTTP start: /mcp (streamable, stateful
  // sessions) and /sse + /messages (2024-11-05 HTTP+SSE).
  const streamable = new Map(); // session id -> transport
  const sse = new Map();
  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, `http://${req.headers.host ?? 'localhost'}`);
      if (url.pathname === '/mcp') {
        const sid = req.headers['mcp-session-id'];
        const body = req.method === 'POST' ? await readBody(req) : undefined;
        let t = sid ? streamable.get(sid) : undefined;
        if (!t) {
          if (sid) return httpError(res, 404, 'Session not found', -32001);
          if (req.method !== 'POST' || !isInitializeRequest(body)) {
            return httpError(res, 400, 'Bad Request: No valid session ID provided');
          }
          t = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (id) => streamable.set(id, t),
          });
          t.onclose = () => t.sessionId && streamable.delete(t.sessionId);
          await buildServer().connect(t);
        }
        await t.handleRequest(req, res, body);
      } else if (url.pathname === '/sse' && req.method === 'GET') {
        const t = new SSEServerTransport('/messages', res);
        sse.set(t.sessionId, t);
        t.onclose = () => sse.delete(t.sessionId);
        await buildServer().connect(t);
      } else if (url.pathname === '/messages' && req.method === 'POST') {
        const t = sse.get(url.searchParams.get('sessionId') ?? '');
        if (!t) return httpError(res, 404, 'Session not found');
        await t.handlePostMessage(req, res);
      } else {
        res.writeHead(404).end('not found');
      }
    } catch (e) {
      log('error', e?.stack ?? e);
      httpError(res, 500, String(e?.message ?? e), -32603);
    }
  });
  server.listen(Number(args.port), args.host, () => log(`listening on http://${args.host}:${args.port} (/mcp, /sse)`));
  const stop = () => { server.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => { log('fatal', e?.stack ?? e); process.exit(1); });
