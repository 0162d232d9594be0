#!/usr/bin/env node
// The official conformance suite's fixtures on @modelcontextprotocol/sdk 1.x (handshake
// era), for tests/conformance/run.py: the tools, resources and prompts its server
// scenarios call (`test_simple_text`, `test://static-text`, `test_simple_prompt`, ...),
// written after the suite's own example server (examples/servers/typescript/
// everything-server.ts), its 2026-07-28 path left out: this upstream is handshake era.
//   node conformance_server_sdk1.mjs --transport streamable-http --port N [--host 127.0.0.1]
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { toJsonSchemaCompat } from '@modelcontextprotocol/sdk/server/zod-json-schema-compat.js';
import { ElicitResultSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { parseArgs } from './lib/common.mjs';

const IMAGE = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const AUDIO = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';
const SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};
const DEFAULTS_FORM = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'User name', default: 'John Doe' },
    age: { type: 'integer', description: 'User age', default: 30 },
    score: { type: 'number', description: 'User score', default: 95.5 },
    status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verification status', default: true },
  },
  required: [],
};
const ENUMS_FORM = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
    titledSingle: {
      type: 'string', description: 'Select one option with titles',
      oneOf: [{ const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }],
    },
    legacyEnum: {
      type: 'string', description: 'Select one option (legacy)',
      enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'],
    },
    untitledMulti: {
      type: 'array', description: 'Select multiple options', minItems: 1, maxItems: 3,
      items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    },
    titledMulti: {
      type: 'array', description: 'Select multiple options with titles', minItems: 1, maxItems: 3,
      items: { anyOf: [{ const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] },
    },
  },
  required: [],
};

const transports = {};
const events = new Map(); // event id -> {streamId, message}: resumable streams (SSE polling)
const eventStore = {
  async storeEvent(streamId, message) {
    const id = `${streamId}::${Date.now()}_${randomUUID()}`;
    events.set(id, { streamId, message });
    return id;
  },
  async replayEventsAfter(lastEventId, { send }) {
    const streamId = lastEventId.split('::')[0];
    const later = [...events].filter(([id, e]) => e.streamId === streamId && id > lastEventId);
    later.sort(([a], [b]) => a.localeCompare(b));
    for (const [id, { message }] of later) if (Object.keys(message).length) await send(id, message);
    return streamId;
  },
};

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const user = (content) => ({ role: 'user', content });

function fixedTools(server) {
  server.registerTool('test_simple_text', { description: 'Simple text' }, async () =>
    text('This is a simple text response for testing.'));
  server.registerTool('test_image_content', { description: 'Image content' }, async () =>
    ({ content: [{ type: 'image', data: IMAGE, mimeType: 'image/png' }] }));
  server.registerTool('test_audio_content', { description: 'Audio content' }, async () =>
    ({ content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }] }));
  server.registerTool('test_embedded_resource', { description: 'Embedded resource' }, async () => ({
    content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }],
  }));
  server.registerTool('test_multiple_content_types', { description: 'Mixed content' }, async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: IMAGE, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } },
    ],
  }));
  server.registerTool('test_error_handling', { description: 'Always an error' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool('json_schema_2020_12_tool', {
    description: 'JSON Schema 2020-12 input (SEP-1613)',
    inputSchema: { name: z.string().optional(), address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional() },
  }, async (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`));
  // SEP-2243: a parameter a 2026-07-28 client mirrors in an Mcp-Param-Region header
  // (listed with `x-mcp-header` below; a handshake-era SDK does not know the keyword).
  server.registerTool('test_custom_header', { description: 'A custom header parameter', inputSchema: { region: z.string() } },
    async ({ region }) => text(`region: ${region}`));
}

function streamingTools(server) {
  server.registerTool('test_tool_with_logging', { description: 'Logs while it runs', inputSchema: {} },
    async (_args, { sendNotification }) => {
      for (const [i, data] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
        if (i) await sleep(50);
        await sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
      }
      return text('Tool with logging executed successfully');
    });
  server.registerTool('test_tool_with_progress', { description: 'Reports progress', inputSchema: {} },
    async (_args, { sendNotification, _meta }) => {
      const progressToken = _meta?.progressToken ?? 0;
      for (const progress of [0, 50, 100]) {
        if (progress) await sleep(50);
        await sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` } });
      }
      return text(String(progressToken));
    });
  server.registerTool('test_reconnection', { description: 'Closes its SSE stream mid-call (SEP-1699)', inputSchema: {} },
    async (_args, { sessionId, requestId }) => {
      const transport = sessionId ? transports[sessionId] : undefined;
      if (transport && requestId) transport.closeSSEStream(requestId);
      await sleep(100);
      return text('Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.');
    });
}

function askingTools(server) {
  server.registerTool('test_sampling', { description: 'Asks sampling', inputSchema: { prompt: z.string() } },
    async ({ prompt }, { sendRequest }) => {
      try {
        const r = await sendRequest({ method: 'sampling/createMessage', params: { messages: [user({ type: 'text', text: prompt })], maxTokens: 100 } },
          z.object({}).passthrough());
        return text(`LLM response: ${r.content?.text || r.message?.content?.text || 'No response'}`);
      } catch (e) {
        return text(`Sampling not supported or error: ${e.message}`);
      }
    });
  // `message` undefined: the tool takes it as its argument.
  const elicit = (name, message, form, prefix) =>
    server.registerTool(name, { description: `Elicits (${name})`, inputSchema: message ? {} : { message: z.string() } },
      async (args, { sendRequest }) => {
        try {
          const r = await sendRequest({ method: 'elicitation/create', params: { message: args.message ?? message, requestedSchema: form } }, ElicitResultSchema);
          return text(`${prefix}: action=${r.action}, content=${JSON.stringify(r.content || {})}`);
        } catch (e) {
          process.stderr.write(`[conformance_server_sdk1] ${name}: ${e.message}\n`);
          return text(`Elicitation not supported or error: ${e.message}`);
        }
      });
  elicit('test_elicitation', undefined,
    { type: 'object', properties: { response: { type: 'string', description: "User's response" } }, required: ['response'] }, 'User response');
  elicit('test_elicitation_sep1034_defaults', 'Please review and update the form fields with defaults', DEFAULTS_FORM, 'Elicitation completed');
  elicit('test_elicitation_sep1330_enums', 'Please select options from the enum fields', ENUMS_FORM, 'Elicitation completed');
}

// The suite's input-required fixtures (SEP-2322), asked the handshake-era way: mid-call
// requests, which a gateway turns into a 2026-07-28 client's InputRequiredResult rounds.
const form = (field, type = 'string') => ({ type: 'object', properties: { [field]: { type } }, required: [field] });
const elicitReq = (message, field, type) => ({ method: 'elicitation/create', params: { message, requestedSchema: form(field, type) } });
const sampleReq = (prompt) => ({ method: 'sampling/createMessage', params: { messages: [user({ type: 'text', text: prompt })], maxTokens: 100 } });
const ROOTS_REQ = { method: 'roots/list', params: {} };
const ANY = z.object({}).passthrough();

function inputRequiredTools(server) {
  const tool = (name, asks) => server.registerTool(name, { description: `SEP-2322 fixture ${name}`, inputSchema: {} },
    async (_args, extra) => text(await asks(extra)));
  tool('test_input_required_result_elicitation', async ({ sendRequest }) =>
    `Hello, ${JSON.stringify((await sendRequest(elicitReq('What is your name?', 'name'), ANY)).content)}`);
  tool('test_input_required_result_sampling', async ({ sendRequest }) =>
    `sampled: ${JSON.stringify((await sendRequest(sampleReq('What is the capital of France?'), ANY)).content)}`);
  tool('test_input_required_result_list_roots', async ({ sendRequest }) =>
    `roots: ${JSON.stringify((await sendRequest(ROOTS_REQ, ANY)).roots)}`);
  tool('test_input_required_result_request_state', async ({ sendRequest }) => {
    await sendRequest(elicitReq('Please confirm', 'ok', 'boolean'), ANY);
    return 'state-ok: confirmed';
  });
  tool('test_input_required_result_tampered_state', async ({ sendRequest }) => {
    await sendRequest(elicitReq('What is your name?', 'name'), ANY);
    return 'state-ok';
  });
  tool('test_input_required_result_multiple_inputs', async ({ sendRequest }) => {
    await Promise.all([sendRequest(elicitReq('What is your name?', 'name'), ANY), sendRequest(sampleReq('Say hello'), ANY), sendRequest(ROOTS_REQ, ANY)]);
    return 'all inputs received';
  });
  tool('test_input_required_result_multi_round', async ({ sendRequest }) => {
    const name = await sendRequest(elicitReq('What is your name?', 'name'), ANY);
    await sendRequest(elicitReq('Favourite colour?', 'color'), ANY);
    return `multi-round complete: ${JSON.stringify(name.content)}`;
  });
  // Asks only what the client declared (the handshake-era client: its initialize).
  tool('test_input_required_result_capabilities', async ({ sendRequest }) => {
    const caps = server.server.getClientCapabilities() ?? {};
    const asks = [];
    if (caps.sampling) asks.push(sendRequest(sampleReq('What is the capital of France?'), ANY));
    if (caps.elicitation) asks.push(sendRequest(elicitReq('What is your name?', 'name'), ANY));
    return `answered ${(await Promise.all(asks)).length}`;
  });
  // The suite's diagnostic tool (SEP-2575): asks sampling, which a client must have declared.
  tool('test_missing_capability', async ({ sendRequest }) => {
    await sendRequest(sampleReq('Say hi'), ANY);
    return 'sampled';
  });
  server.registerPrompt('test_input_required_result_prompt', { description: 'Asks a context first (SEP-2322)' },
    async ({ sendRequest }) => {
      const r = await sendRequest(elicitReq('What context should the prompt use?', 'context'), ANY);
      return { messages: [user({ type: 'text', text: `Prompt with context: ${JSON.stringify(r.content)}` })] };
    });
}

function resources(server, notify) {
  const fixed = (name, uri, mimeType, content) => server.registerResource(name, uri, { title: name, mimeType },
    async () => ({ contents: [{ uri, mimeType, ...content }] }));
  fixed('static-text', 'test://static-text', 'text/plain', { text: 'This is the content of the static text resource.' });
  fixed('static-binary', 'test://static-binary', 'image/png', { blob: IMAGE });
  fixed('watched-resource', 'test://watched-resource', 'text/plain', { text: 'Watched resource content' });
  server.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'Resource Template', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [{ uri: uri.toString(), mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }],
    }));
  const subscriptions = new Set();
  for (const verb of ['subscribe', 'unsubscribe']) {
    server.server.setRequestHandler(z.object({ method: z.literal(`resources/${verb}`) }).passthrough(), async (req) => {
      if (verb === 'subscribe') subscriptions.add(req.params.uri); else subscriptions.delete(req.params.uri);
      notify(`${verb}d: ${req.params.uri}`);
      return {};
    });
  }
}

function prompts(server) {
  server.registerPrompt('test_simple_prompt', { description: 'No arguments' }, async () =>
    ({ messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })] }));
  server.registerPrompt('test_prompt_with_arguments', { description: 'Two arguments', argsSchema: { arg1: z.string(), arg2: z.string() } },
    async ({ arg1, arg2 }) => ({ messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })] }));
  server.registerPrompt('test_prompt_with_embedded_resource', { description: 'Embeds a resource', argsSchema: { resourceUri: z.string() } },
    async ({ resourceUri }) => ({
      messages: [
        user({ type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
        user({ type: 'text', text: 'Please process the embedded resource above.' }),
      ],
    }));
  server.registerPrompt('test_prompt_with_image', { description: 'An image' }, async () => ({
    messages: [user({ type: 'image', data: IMAGE, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })],
  }));
}

// tools/list as registered, except the SEP-1613 tool, whose raw 2020-12 schema the
// SDK's zod conversion would lose.
function schemaOf(name, tool) {
  if (!tool.inputSchema) return { type: 'object', properties: {} };
  const schema = toJsonSchemaCompat(tool.inputSchema, { strictUnions: true, pipeStrategy: 'input' });
  if (name === 'test_custom_header') schema.properties.region['x-mcp-header'] = 'Region';
  return schema;
}

function listTools(server) {
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(server._registeredTools).filter(([, t]) => t.enabled).map(([name, t]) => (
      name === 'json_schema_2020_12_tool'
        ? { name, description: t.description, inputSchema: SCHEMA_2020_12 }
        : {
          name, title: t.title, description: t.description, annotations: t.annotations, _meta: t._meta,
          inputSchema: schemaOf(name, t),
        })),
  }));
}

function buildServer() {
  const server = new McpServer({ name: 'conformance-fixtures-sdk1', version: '1.0.0' }, {
    capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, prompts: { listChanged: true }, logging: {}, completions: {} },
  });
  const notify = (data) => server.server.notification({ method: 'notifications/message', params: { level: 'info', logger: 'conformance', data } }).catch(() => {});
  fixedTools(server);
  streamingTools(server);
  askingTools(server);
  inputRequiredTools(server);
  resources(server, notify);
  prompts(server);
  server.server.setRequestHandler(z.object({ method: z.literal('logging/setLevel') }).passthrough(), async (req) => {
    notify(`Log level set to: ${req.params.level}`);
    return {};
  });
  server.server.setRequestHandler(z.object({ method: z.literal('completion/complete') }).passthrough(), async () =>
    ({ completion: { values: [], total: 0, hasMore: false } }));
  listTools(server);
  return server;
}

function jsonError(res, status, code, message) {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

async function post(req, res) {
  const sessionId = req.headers['mcp-session-id'];
  if (sessionId && transports[sessionId]) return transports[sessionId].handleRequest(req, res, req.body);
  if (sessionId) return jsonError(res, 404, -32001, 'Session not found');
  if (req.body?.method !== 'initialize') return jsonError(res, 400, -32000, 'Invalid or missing session ID');
  const server = buildServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore,
    retryInterval: 5000,
    onsessioninitialized: (id) => { transports[id] = transport; },
  });
  transport.onclose = () => {
    if (transport.sessionId) delete transports[transport.sessionId];
    server.close();
  };
  await server.connect(transport);
  return transport.handleRequest(req, res, req.body);
}

async function other(req, res) {
  const transport = transports[req.headers['mcp-session-id']];
  if (!req.headers['mcp-session-id']) return res.status(400).send('Invalid or missing session ID');
  if (!transport) return res.status(404).send('Session not found');
  return transport.handleRequest(req, res);
}

function guarded(handler) {
  return async (req, res) => {
    try {
      await handler(req, res);
    } catch (e) {
      process.stderr.write(`[conformance_server_sdk1] ${e?.stack || e}\n`);
      if (!res.headersSent) jsonError(res, 500, -32603, 'Internal server error');
    }
  };
}

const args = parseArgs(process.argv.slice(2));
const host = args.host || '127.0.0.1';
// createMcpExpressApp: the SDK's DNS-rebinding protection for a loopback host.
const app = createMcpExpressApp({ host });
app.post('/mcp', guarded(post));
app.get('/mcp', guarded(other));
app.delete('/mcp', guarded(other));
app.listen(Number(args.port), host);
