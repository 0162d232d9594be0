#!/usr/bin/env node
// Interop client driver on @modelcontextprotocol/client 2.x.
//   node client_sdk2.mjs --url URL --transport streamable-http|sse [--scenario basic|interactive]
//   node client_sdk2.mjs --transport stdio --command '<argv>' [--scenario ...]
// Extra flags:
//   --protocol-version V   default 2026-07-28.
//       2026-07-28 (or later): versionNegotiation { mode: { pin: V } } — server/discover,
//                              no fallback, fails loudly against a 2025-era server.
//       auto:                  versionNegotiation { mode: 'auto' } — probe, fall back to initialize.
//       a 2025-era revision:   versionNegotiation 'legacy' (the SDK default) with
//                              supportedProtocolVersions [V] — plain initialize offering V.
//   --timeout SECONDS      whole run (default 60).
// Prints one JSON object on stdout (see ../CONTRACT.md).
import { z } from 'zod';
import { Client, StreamableHTTPClientTransport, SSEClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import {
  parseArgs, shellSplit, pkgVersion, StepRunner, runScenario, emit, installGlobalTimeout,
  ELICIT_ANSWER, ROOTS_ANSWER, samplingAnswer, errorJson, tapNotifications, setCleanup,
  RootsState, rootsScenario,
} from './lib/common.mjs';

const args = parseArgs(process.argv.slice(2), {
  scenario: 'basic', timeout: '60', 'root-a': 'file:///tmp/a', 'root-b': 'file:///tmp/b',
  'roots-tool': 'show_roots', 'roots-wait': '5', 'protocol-version': '2026-07-28' });
const output = { sdk: `typescript-sdk ${pkgVersion('@modelcontextprotocol/client')}`, protocolVersion: null, steps: {} };
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

function negotiationOptions(pv) {
  if (pv === 'auto') return { versionNegotiation: { mode: 'auto' } };
  if (pv >= '2026-07-28') return { versionNegotiation: { mode: { pin: pv } } };
  return { supportedProtocolVersions: [pv] }; // legacy mode (default)
}

async function main() {
  const interactive = args.scenario === 'interactive';
  // scenario `roots`: declare roots with listChanged and let the server ask on its own
  const roots = args.scenario === 'roots' ? new RootsState(args['root-a']) : null;
  const client = new Client(
    { name: 'interop-node-sdk2-client', version: '1.0.0' },
    {
      capabilities: roots ? { roots: { listChanged: true } }
      : interactive ? { elicitation: { form: {} }, sampling: {}, roots: { listChanged: false } } : {},
      ...negotiationOptions(args['protocol-version']),
    },
  );
  const progress = [];
  const logs = [];
  if (interactive) {
    client.setRequestHandler('elicitation/create', async () => ELICIT_ANSWER);
    client.setRequestHandler('sampling/createMessage', async (req) => samplingAnswer(req.params));
    client.setRequestHandler('roots/list', async () => ({ roots: ROOTS_ANSWER }));
  }
  if (roots) client.setRequestHandler('roots/list', async () => ({ roots: roots.answer() }));
  client.setNotificationHandler('notifications/message', () => {}); // recorded by the tap

  const transport = makeTransport();
  setCleanup(() => transport.close());
  const connected = await run.step('connect', async () => {
    await client.connect(transport);
    output.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
    return {
      protocolVersion: output.protocolVersion,
      era: client.getProtocolEra(),
      serverInfo: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
    };
  });
  if (connected && roots) {
    await rootsScenario(run, args, roots, () => client.callTool({ name: args['roots-tool'], arguments: {} }),
      () => client.sendRootsListChanged());
  } else if (connected) {
    tapNotifications(transport, progress, logs);
    const adapter = {
      progress, logs,
      listTools: (cursor) => client.listTools(cursor ? { cursor } : undefined),
      listResources: (cursor) => client.listResources(cursor ? { cursor } : undefined),
      listTemplates: (cursor) => client.listResourceTemplates(cursor ? { cursor } : undefined),
      listPrompts: (cursor) => client.listPrompts(cursor ? { cursor } : undefined),
      callTool: (name, a, o = {}) => client.callTool({ name, arguments: a },
        o.withProgress ? { onprogress: () => {} } : undefined),
      readResource: (uri) => client.readResource({ uri }),
      // logging/setLevel exists only in the handshake era (2026-07-28 asks per request).
      setLevel: client.getProtocolEra() !== 'modern' ? (level) => client.setLoggingLevel(level) : undefined,
      getPrompt: (name, a) => client.getPrompt({ name, arguments: a }),
      complete: (params) => client.complete(params),
      rawRequest: (method, params) => client.request({ method, params }, z.looseObject({})),
    };
    await runScenario(run, adapter, args.scenario);
  }
  try { await client.close(); } catch { /* ignore */ }
  emit(output, 0);
}

main().catch((e) => {
  output.error = errorJson(e);
  process.stderr.write(`[client_sdk2] crashed: ${e?.stack ?? e}\n`);
  emit(output, 1);
});
