#!/usr/bin/env node
// Interop server on @modelcontextprotocol/server 2.x, serving protocol revision
// 2026-07-28 (stateless: per-request `_meta` envelope, server/discover,
// input_required results for elicitation / sampling / roots).
//   node server_sdk2.mjs --transport streamable-http|stdio --host 127.0.0.1 --port N [--legacy serve|reject] [--e2e]
// --e2e adds the tools of tests/e2e/test_sdk_*.py (a call that waits for its
//   cancellation; `where`, whose `region` argument declares x-mcp-header).
// --legacy (default `serve`): how 2025-era traffic is handled. `serve` is the
//   SDK default (HTTP: stateless per-request legacy fallback; stdio: a pinned
//   2025-era connection); `reject` answers legacy traffic with the
//   unsupported-protocol-version error (modern-only strict endpoint).
// Packages resolve through ./node_modules -> <repo>/.peers/node/node_modules
// (symlink created by ./install).
import { createServer } from 'node:http';
import { z } from 'zod';
import {
  McpServer, ResourceTemplate, completable, createMcpHandler, inputRequired, inputResponse, ProtocolError,
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { toNodeHandler } from '@modelcontextprotocol/node';
import {
  parseArgs, pkgVersion, PNG_BASE64, BINARY_BASE64, NAMES, MANY, paginate,
} from './lib/common.mjs';

const SDK_VERSION = pkgVersion('@modelcontextprotocol/server');
const log = (...a) => process.stderr.write(`[server_sdk2] ${a.join(' ')}\n`);
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const OPTS = { e2e: false }; // --e2e: the end-to-end test tools below

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
  // Runs until cancelled (30 s at most): progress says it started; the abort is recorded by tag.
  mcp.registerTool('wait_cancel', { description: 'Wait for cancellation', inputSchema: z.object({ tag: z.string() }) },
    async ({ tag }, c) => {
      const signal = c.mcpReq.signal;
      const aborted = new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      const token = c.mcpReq._meta?.progressToken;
      if (token !== undefined) {
        await c.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, message: 'started' } });
      }
      await within(30000, aborted);
      if (signal.aborted) noteAbort(tag, c.mcpReq.id, signal.reason);
      return text(signal.aborted ? `cancelled ${tag}` : `not cancelled ${tag}`);
    });
  // What wait_cancel(tag) saw: its own request id and the reason, once aborted (10 s at most).
  mcp.registerTool('aborted', { description: 'Report a cancellation', inputSchema: z.object({ tag: z.string() }) },
    async ({ tag }) => {
      if (!ABORTED.has(tag)) {
        await within(10000, new Promise((r) => ABORT_WAITERS.set(tag, [...(ABORT_WAITERS.get(tag) ?? []), r])));
      }
      return text(JSON.stringify(ABORTED.get(tag) ?? null));
    });
  // SEP-2243: `region` is mirrored in an Mcp-Param-Region header, which the SDK checks.
  mcp.registerTool('where', {
    description: 'Say where',
    inputSchema: z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }), what: z.string() }),
  }, async ({ region, what }) => text(`${what} in ${region}`));
}

function buildServer(ctx) {
  const mcp = new McpServer(
    { name: 'interop-node-sdk2', version: SDK_VERSION },
    { capabilities: { logging: {}, completions: {} } },
  );
  if (OPTS.e2e) registerE2eTools(mcp);

  mcp.registerTool('echo', { description: 'Echo text', inputSchema: z.object({ text: z.string() }) },
    async ({ text: t }) => text(`echo: ${t}`));

  mcp.registerTool('add', {
    description: 'Add two integers',
    inputSchema: z.object({ a: z.int(), b: z.int() }),
    outputSchema: z.object({ sum: z.int() }),
  }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } }));

  mcp.registerTool('image', { description: 'A tiny PNG', inputSchema: z.object({}) },
    async () => ({ content: [{ type: 'image', data: PNG_BASE64, mimeType: 'image/png' }] }));

  mcp.registerTool('fail', { description: 'Always fails', inputSchema: z.object({}) },
    async () => ({ isError: true, content: [{ type: 'text', text: 'this tool always fails' }] }));

  // Multi-round-trip tools: written once with inputRequired(); on 2026-07-28 the
  // client fulfils the input_required result and retries, on 2025-era
  // connections the SDK's legacy shim turns it into real server->client requests.
  mcp.registerTool('ask_name', { description: 'Elicit a name', inputSchema: z.object({}) }, async (_args, c) => {
    const r = inputResponse(c.mcpReq.inputResponses, 'name');
    if (r.kind === 'missing') {
      return inputRequired({
        inputRequests: {
          name: inputRequired.elicit({
            message: 'What is your name?',
            requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
          }),
        },
      });
    }
    if (r.kind === 'elicit' && r.action === 'accept' && r.content?.name !== undefined) return text(`hello ${r.content.name}`);
    return text(`no name (${r.kind === 'elicit' ? r.action : r.kind})`);
  });

  mcp.registerTool('summarize', { description: 'Summarize via sampling', inputSchema: z.object({ text: z.string() }) },
    async ({ text: t }, c) => {
      const r = inputResponse(c.mcpReq.inputResponses, 'summary');
      if (r.kind !== 'sampling') {
        return inputRequired({
          inputRequests: {
            summary: inputRequired.createMessage({
              messages: [{ role: 'user', content: { type: 'text', text: t } }],
              maxTokens: 50,
            }),
          },
        });
      }
      const content = Array.isArray(r.result.content) ? r.result.content[0] : r.result.content;
      return text(`summary: ${content?.type === 'text' ? content.text : JSON.stringify(content)}`);
    });

  mcp.registerTool('show_roots', { description: 'List client roots', inputSchema: z.object({}) }, async (_a, c) => {
    const r = inputResponse(c.mcpReq.inputResponses, 'roots');
    if (r.kind !== 'roots') return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
    return text(r.roots.map((x) => x.uri).join(','));
  });

  mcp.registerTool('progress', { description: 'Report progress', inputSchema: z.object({ steps: z.int() }) },
    async ({ steps }, c) => {
      const token = c.mcpReq._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        if (token !== undefined) {
          await c.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: token, progress: i, total: steps, message: `step ${i}` },
          });
        }
        await c.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data: 'working' } });
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
    argsSchema: z.object({ name: completable(z.string(), (v) => NAMES.filter((n) => n.startsWith(v ?? ''))) }),
  }, ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}!` } }] }));

  // Pagination: McpServer lists everything in one page; wrap its handler and
  // serve 10 per page (the low-level Server lets a handler be replaced).
  const inner = mcp.server._requestHandlers.get('resources/list');
  mcp.server.setRequestHandler('resources/list', async (req, c) => {
    const params = { ...(req.params ?? {}) };
    delete params.cursor;
    const all = (await inner({ ...req, params }, c)).resources;
    let res;
    try {
      res = paginate(all, req.params?.cursor);
    } catch (e) {
      throw new ProtocolError(-32602, e.message);
    }
    return res.next === undefined ? { resources: res.page } : { resources: res.page, nextCursor: res.next };
  });
  return mcp;
}

async function main() {
  const args = parseArgs(process.argv.slice(2), { transport: 'stdio', host: '127.0.0.1', port: '8000', legacy: 'serve', e2e: 'false' });
  OPTS.e2e = args.e2e === 'true';
  const onerror = (e) => log('error', e?.message ?? e);
  if (args.transport === 'stdio') {
    serveStdio(buildServer, { legacy: args.legacy === 'reject' ? 'reject' : 'serve', onerror });
    log('stdio ready');
    return;
  }
  if (args.transport !== 'streamable-http') throw new Error(`unsupported transport ${args.transport} (2.x has no HTTP+SSE server)`);
  const handler = createMcpHandler(buildServer, { legacy: args.legacy === 'reject' ? 'reject' : 'stateless', onerror });
  const nodeHandler = toNodeHandler(handler);
  const server = createServer(async (req, res) => {
    try {
      const path = (req.url ?? '/').split('?')[0];
      if (path !== '/mcp') { res.writeHead(404).end('not found'); return; }
      await nodeHandler(req, res);
    } catch (e) {
      log('error', e?.stack ?? e);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: String(e?.message ?? e) }, id: null }));
    }
  });
  server.listen(Number(args.port), args.host, () => log(`listening on http://${args.host}:${args.port}/mcp`));
  const stop = () => { server.close(); handler.close().finally(() => process.exit(0)); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => { log('fatal', e?.stack ?? e); process.exit(1); });
