#!/usr/bin/env node
// Interop server on @modelcontextprotocol/sdk 1.x (handshake era; speaks
// 2025-11-25 and the older revisions the SDK supports).
//   node server_sdk1.mjs --transport streamable-http|sse|stdio --host 127.0.0.1 --port N
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
import {
  parseArgs, pkgVersion, PNG_BASE64, BINARY_BASE64, NAMES, MANY, paginate,
} from './lib/common.mjs';

const SDK_VERSION = pkgVersion('@modelcontextprotocol/sdk');
const log = (...a) => process.stderr.write(`[server_sdk1] ${a.join(' ')}\n`);

function buildServer() {
  const mcp = new McpServer(
    { name: 'interop-node-sdk1', version: SDK_VERSION },
    { capabilities: { logging: {}, completions: {} } },
  );
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
  const args = parseArgs(process.argv.slice(2), { transport: 'stdio', host: '127.0.0.1', port: '8000' });
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
