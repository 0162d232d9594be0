#!/usr/bin/env node
// Interop client driver on @modelcontextprotocol/sdk 1.x (handshake era).
//   node client_sdk1.mjs --url URL --transport streamable-http|sse [--scenario basic|interactive]
//   node client_sdk1.mjs --transport stdio --command '<argv>' [--scenario ...]
// Extra flags: --protocol-version V  (offer V in `initialize` instead of the SDK's
//   LATEST_PROTOCOL_VERSION 2025-11-25; done by rewriting the outgoing message,
//   the 1.x SDK has no option for it), --timeout SECONDS (whole run, default 60).
// Prints one JSON object on stdout (see ../CONTRACT.md).
import { z } from 'zod';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  parseArgs, shellSplit, pkgVersion, StepRunner, runScenario, emit, installGlobalTimeout,
  ELICIT_ANSWER, ROOTS_ANSWER, samplingAnswer, errorJson, tapNotifications, setCleanup,
  RootsState, rootsScenario,
} from './lib/common.mjs';

const args = parseArgs(process.argv.slice(2), {
  scenario: 'basic', timeout: '60', 'root-a': 'file:///tmp/a', 'root-b': 'file:///tmp/b',
  'roots-tool': 'show_roots', 'roots-wait': '5' });
const output = { sdk: `typescript-sdk ${pkgVersion('@modelcontextprotocol/sdk')}`, protocolVersion: null, steps: {} };
installGlobalTimeout(output, Number(args.timeout) * 1000);
const run = new StepRunner(output);

function makeTransport() {
  switch (args.transport) {
    case 'stdio': {
      if (!args.command) throw new Error('--command is required for stdio');
      const [command, ...cargs] = shellSplit(args.command);
      return new StdioClientTransport({ command, args: cargs, env: { ...process.env }, stderr: 'inherit' });
    }
    case 'streamable-http':
      return new StreamableHTTPClientTransport(new URL(args.url));
    case 'sse':
      return new SSEClientTransport(new URL(args.url));
    default:
      throw new Error(`unknown transport ${args.transport}`);
  }
}

async function main() {
  const interactive = args.scenario === 'interactive';
  // scenario `roots`: declare roots with listChanged and let the server ask on its own
  const roots = args.scenario === 'roots' ? new RootsState(args['root-a']) : null;
  const client = new Client(
    { name: 'interop-node-sdk1-client', version: '1.0.0' },
    { capabilities: roots ? { roots: { listChanged: true } }
      : interactive ? { elicitation: { form: {} }, sampling: {}, roots: { listChanged: false } } : {} },
  );
  const progress = [];
  const logs = [];
  if (interactive) {
    client.setRequestHandler(ElicitRequestSchema, async () => ELICIT_ANSWER);
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => samplingAnswer(req.params));
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: ROOTS_ANSWER }));
  }
  if (roots) client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: roots.answer() }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, () => {}); // recorded by the tap

  const transport = makeTransport();
  setCleanup(() => transport.close());
  // observe the negotiated version; optionally rewrite the offered one
  const origSend = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    if (args['protocol-version'] && msg?.method === 'initialize') {
      msg = { ...msg, params: { ...msg.params, protocolVersion: args['protocol-version'] } };
    }
    return origSend(msg, opts);
  };
  const origSet = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => { output.protocolVersion = v; origSet?.(v); };

  const connected = await run.step('connect', async () => {
    await client.connect(transport);
    return {
      protocolVersion: output.protocolVersion,
      serverInfo: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
    };
  });
  if (connected) tapNotifications(transport, progress, logs);
  if (connected && roots) {
    await rootsScenario(run, args, roots, () => client.callTool({ name: args['roots-tool'], arguments: {} }, CallToolResultSchema),
      () => client.sendRootsListChanged());
  } else if (connected) {
    const adapter = {
      progress, logs,
      listTools: (cursor) => client.listTools(cursor ? { cursor } : undefined),
      listResources: (cursor) => client.listResources(cursor ? { cursor } : undefined),
      listTemplates: (cursor) => client.listResourceTemplates(cursor ? { cursor } : undefined),
      listPrompts: (cursor) => client.listPrompts(cursor ? { cursor } : undefined),
      callTool: (name, a, o = {}) => client.callTool({ name, arguments: a }, CallToolResultSchema,
        o.withProgress ? { onprogress: () => {} } : undefined),
      readResource: (uri) => client.readResource({ uri }),
      getPrompt: (name, a) => client.getPrompt({ name, arguments: a }),
      complete: (params) => client.complete(params),
      rawRequest: (method, params) => client.request({ method, params }, z.object({}).passthrough()),
      setLevel: (level) => client.setLoggingLevel(level),
    };
    await runScenario(run, adapter, args.scenario);
  }
  try { await client.close(); } catch { /* ignore */ }
  emit(output, 0);
}

main().catch((e) => {
  output.error = errorJson(e);
  process.stderr.write(`[client_sdk1] crashed: ${e?.stack ?? e}\n`);
  emit(output, 1);
});
