// Shared, dependency-free helpers for the Node interop peers (see ../../CONTRACT.md).
// Must not import any npm package: it is used by peers built on different SDKs.
import { readFileSync } from 'node:fs';

// stdout carries one JSON report and nothing else (CONTRACT.md): whatever an SDK logs
// with console.log/info/debug (its warnings, among them) goes to stderr instead.
for (const name of ['log', 'info', 'debug']) console[name] = (...a) => console.error(...a);

/** Parse `--flag value` / `--flag=value` argv into an object (values are strings). */
export function parseArgs(argv, defaults = {}) {
  const out = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument: ${a}`);
    const eq = a.indexOf('=');
    if (eq > 0) {
      out[a.slice(2, eq)] = a.slice(eq + 1);
    } else {
      const v = argv[i + 1];
      if (v === undefined || v.startsWith('--')) out[a.slice(2)] = 'true';
      else { out[a.slice(2)] = v; i++; }
    }
  }
  return out;
}

/** POSIX-shell-like split (single quotes, double quotes, backslash escapes), like Python shlex.split. */
export function shellSplit(s) {
  const out = [];
  let cur = '';
  let have = false;
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "'") {
      const j = s.indexOf("'", i + 1);
      if (j < 0) throw new Error('unterminated single quote in --command');
      cur += s.slice(i + 1, j); have = true; i = j + 1;
    } else if (c === '"') {
      i++; have = true;
      while (i < s.length && s[i] !== '"') {
        if (s[i] === '\\' && i + 1 < s.length && '"\\$`\n'.includes(s[i + 1])) { cur += s[i + 1]; i += 2; }
        else { cur += s[i]; i++; }
      }
      if (i >= s.length) throw new Error('unterminated double quote in --command');
      i++;
    } else if (c === '\\' && i + 1 < s.length) {
      cur += s[i + 1]; have = true; i += 2;
    } else if (/\s/.test(c)) {
      if (have) { out.push(cur); cur = ''; have = false; }
      i++;
    } else {
      cur += c; have = true; i++;
    }
  }
  if (have) out.push(cur);
  return out;
}

/** Version of an installed package, read from node_modules next to this folder. */
export function pkgVersion(name) {
  const url = new URL(`../node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')).version;
}

// ---- catalog data -------------------------------------------------------------

/** A 1x1 transparent PNG. */
export const PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
/** bytes 0..15, base64 */
export const BINARY_BASE64 = Buffer.from([...Array(16).keys()]).toString('base64');
export const NAMES = ['alice', 'bob', 'carol'];
export const MANY = 25; // extra demo://many/<i> resources
export const PAGE_SIZE = 10;

/** Paginate a full resource list: cursor is the decimal start offset. */
export function paginate(items, cursor) {
  let start = 0;
  if (cursor !== undefined && cursor !== null) {
    start = Number.parseInt(String(cursor), 10);
    if (!Number.isInteger(start) || start < 0 || String(start) !== String(cursor)) {
      const e = new Error(`invalid cursor: ${cursor}`);
      e.code = -32602;
      throw e;
    }
  }
  const page = items.slice(start, start + PAGE_SIZE);
  const next = start + PAGE_SIZE < items.length ? String(start + PAGE_SIZE) : undefined;
  return { page, next };
}

// ---- client side ------------------------------------------------------------

export const ELICIT_ANSWER = { action: 'accept', content: { name: 'Ada' } };
export const ROOTS_ANSWER = [{ uri: 'file:///tmp/root', name: 'root' }];

/** First user text of a sampling/createMessage request's params. */
export function firstUserText(params) {
  for (const m of params?.messages ?? []) {
    if (m.role !== 'user') continue;
    const blocks = Array.isArray(m.content) ? m.content : [m.content];
    for (const b of blocks) if (b && b.type === 'text') return b.text;
  }
  return '';
}

export function samplingAnswer(params) {
  return {
    role: 'assistant',
    model: 'test-model',
    content: { type: 'text', text: `sampled: ${firstUserText(params)}` },
    stopReason: 'endTurn',
  };
}

/**
 * Record progress values and log data straight off the transport (after
 * connect): SDK-level progress callbacks can miss notifications that arrive in
 * the same read chunk as the response (1.x deletes the progress handler
 * synchronously on the response while notification dispatch is deferred).
 */
export function tapNotifications(transport, progress, logs) {
  const inner = transport.onmessage;
  transport.onmessage = (msg, extra) => {
    if (msg && msg.id === undefined && msg.method === 'notifications/progress') progress.push(msg.params?.progress);
    if (msg && msg.id === undefined && msg.method === 'notifications/message') logs.push(msg.params?.data);
    return inner?.call(transport, msg, extra);
  };
}

/** Plain-JSON copy of a value (drops undefined, class instances -> objects). */
export function plain(v) {
  return v === undefined ? null : JSON.parse(JSON.stringify(v));
}

export function errorJson(e) {
  // 2.x HTTP transport errors (SdkHttpError) carry the JSON-RPC error in the
  // HTTP body (e.g. 404 + -32601 for an unknown method on 2026-07-28): surface it.
  const body = typeof e?.data?.text === 'string' ? e.data.text : undefined;
  if (body !== undefined) {
    try {
      const err = JSON.parse(body)?.error;
      if (err && Number.isInteger(err.code)) {
        return { code: err.code, message: String(err.message ?? ''), httpStatus: e.data.status ?? null };
      }
    } catch { /* not JSON */ }
  }
  // 1.x StreamableHTTPError: code = HTTP status, JSON-RPC error inside the message.
  const msg = e?.message ?? String(e);
  const at = msg.indexOf('Error POSTing to endpoint: {');
  if (at >= 0) {
    try {
      const err = JSON.parse(msg.slice(msg.indexOf('{', at)))?.error;
      if (err && Number.isInteger(err.code)) {
        return { code: err.code, message: String(err.message ?? ''), httpStatus: Number.isInteger(e?.code) ? e.code : null };
      }
    } catch { /* not JSON */ }
  }
  const code = typeof e?.code === 'number' && Number.isInteger(e.code) ? e.code : null;
  return { code, message: msg };
}

/**
 * Runs named steps, recording {result} or {error}; never throws.
 * `output` is the object printed at the end.
 */
export class StepRunner {
  constructor(output, { stepTimeoutMs = 20000 } = {}) {
    this.output = output;
    this.output.steps ??= {};
    this.stepTimeoutMs = stepTimeoutMs;
  }
  async step(name, fn) {
    let timer;
    try {
      const timeout = new Promise((_, rej) => {
        timer = setTimeout(() => rej(new Error(`step ${name} timed out after ${this.stepTimeoutMs} ms`)), this.stepTimeoutMs);
      });
      const result = await Promise.race([Promise.resolve().then(fn), timeout]);
      this.output.steps[name] = { result: plain(result) };
      return result;
    } catch (e) {
      this.output.steps[name] = { error: errorJson(e) };
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Best-effort cleanup run before exiting (e.g. kill a stdio server child). */
let cleanup;
export function setCleanup(fn) { cleanup = fn; }

/** Print the output once and exit. */
let printed = false;
export async function emit(output, code = 0) {
  if (printed) return;
  printed = true;
  if (cleanup) {
    try { await Promise.race([Promise.resolve().then(cleanup), new Promise((r) => setTimeout(r, 5000))]); } catch { /* ignore */ }
  }
  process.stdout.write(JSON.stringify(output) + '\n', () => process.exit(code));
}

/** Kill switch: print what we have and exit non-zero after `ms`. */
export function installGlobalTimeout(output, ms) {
  const t = setTimeout(() => {
    output.error = { code: null, message: `client timed out after ${ms} ms` };
    emit(output, 3);
  }, ms);
  t.unref();
}

/**
 * The contract's `basic` and `interactive` scenarios, against an adapter:
 *   listTools(cursor) listResources(cursor) listTemplates(cursor) listPrompts(cursor)
 *   callTool(name, args, {onprogress}) readResource(uri) getPrompt(name, args)
 *   complete(params) rawRequest(method, params)
 *   progress: array that the adapter's progress handler appends to
 *   logs: array that the adapter's log handler appends to
 */
export async function runScenario(run, a, scenario) {
  async function all(list, key) {
    const items = [];
    let cursor;
    for (let pages = 0; pages < 100; pages++) {
      const r = await list(cursor);
      items.push(...(r[key] ?? []));
      cursor = r.nextCursor;
      if (!cursor) return items;
    }
    throw new Error('more than 100 pages');
  }
  await run.step('tools_list', async () => {
    const tools = await all((c) => a.listTools(c), 'tools');
    return { tools };
  });
  await run.step('call_echo', () => a.callTool('echo', { text: 'hi' }));
  await run.step('call_add', () => a.callTool('add', { a: 2, b: 3 }));
  await run.step('call_add_invalid', () => a.callTool('add', { a: 'x', b: 3 }));
  await run.step('call_image', () => a.callTool('image', {}));
  await run.step('call_fail', () => a.callTool('fail', {}));
  await run.step('resources_list', async () => (await all((c) => a.listResources(c), 'resources')).map((r) => r.uri));
  await run.step('read_text', () => a.readResource('demo://text'));
  await run.step('read_binary', () => a.readResource('demo://binary'));
  await run.step('templates_list', async () => ({
    resourceTemplates: await all((c) => a.listTemplates(c), 'resourceTemplates'),
  }));
  await run.step('read_template', () => a.readResource('demo://items/42'));
  await run.step('prompts_list', async () => ({ prompts: await all((c) => a.listPrompts(c), 'prompts') }));
  await run.step('get_greet', () => a.getPrompt('greet', { name: 'Ada' }));
  await run.step('complete', () =>
    a.complete({ ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'name', value: 'a' } }),
  );
  await run.step('unknown_method', () => a.rawRequest('nonexistent/method', {}));
  if (scenario !== 'interactive') return;
  await run.step('call_ask_name', () => a.callTool('ask_name', {}));
  await run.step('call_summarize', () => a.callTool('summarize', { text: 'hello world' }));
  await run.step('call_show_roots', () => a.callTool('show_roots', {}));
  // The log level opt-in is a step of its own: a failure shows in the verdicts.
  if (a.setLevel) await run.step('set_level', () => a.setLevel('info'));
  await run.step('call_progress', async () => {
    a.progress.length = 0;
    a.logs.length = 0;
    const r = await a.callTool('progress', { steps: 3 }, { withProgress: true });
    // give trailing notifications a moment (they may race the response on some transports)
    await new Promise((res) => setTimeout(res, 200));
    return { ...plain(r), progress: [...a.progress], logs: [...a.logs] };
  });
}

// ---- scenario `roots` (see ../../CONTRACT.md) ----------------------------------------

/** `file:///x/y` -> `/x/y` (what a filesystem server names), else the URI itself. */
export function rootPath(uri) {
  try {
    const u = new URL(uri);
    return u.protocol === 'file:' ? decodeURIComponent(u.pathname) : uri;
  } catch {
    return uri;
  }
}

/** Does a tool's text name this root (a whitespace-separated word: its URI or path)? */
export function namesRoot(text, uri) {
  const words = text.split(/\s+/);
  return words.includes(uri) || words.includes(rootPath(uri));
}

/** The client's current roots and every invocation of its roots handler. */
export class RootsState {
  constructor(uri) {
    this.uri = uri;
    this.invocations = [];
    this.started = Date.now();
    this.waiters = [];
  }
  /** Record one invocation; return the roots to answer with. */
  answer() {
    this.invocations.push({ at: (Date.now() - this.started) / 1000, roots: [this.uri] });
    for (const w of this.waiters.splice(0)) w();
    return [{ uri: this.uri, name: 'root' }];
  }
  /** Wait (bounded) until the handler ran `count` times in all. */
  async waitFor(count, limitMs) {
    const deadline = Date.now() + limitMs;
    while (this.invocations.length < count && Date.now() < deadline) {
      let timer;
      await new Promise((res) => {
        this.waiters.push(res);
        timer = setTimeout(res, deadline - Date.now());
      });
      clearTimeout(timer);
    }
    return { invoked: this.invocations.length >= count, count: this.invocations.length };
  }
}

function toolText(result) {
  return (result?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/**
 * Call the roots tool until its text names `uri`.  The server stores the roots after
 * our handler answered, so the first call may race it: retry (bounded) only while the
 * handler ran since `since` (else one call says all there is to say).
 */
async function callUntilNamed(state, call, uri, since, limitMs) {
  const deadline = Date.now() + limitMs;
  for (let attempts = 1; ; attempts++) {
    const result = await call();
    const text = toolText(result);
    const done = namesRoot(text, uri);
    if (done || state.invocations.length <= since || Date.now() >= deadline) {
      return { text, isError: Boolean(result?.isError), names_expected: done, attempts };
    }
    await new Promise((res) => setTimeout(res, 100)); // polling interval, bounded by deadline
  }
}

/** connect is done: ask-wait-call, change roots, notify-wait-call. */
export async function rootsScenario(run, args, state, callTool, notifyChanged) {
  const waitMs = Number(args['roots-wait'] ?? 5) * 1000;
  await run.step('wait_roots_initial', () => state.waitFor(1, waitMs));
  await run.step('tool_before', () => callUntilNamed(state, callTool, args['root-a'], 0, waitMs));
  const before = state.invocations.length;
  state.uri = args['root-b'];
  await run.step('change_roots', async () => {
    await notifyChanged();
    return { sent: 'notifications/roots/list_changed' };
  });
  await run.step('wait_roots_changed', () => state.waitFor(before + 1, waitMs));
  await run.step('tool_after', () => callUntilNamed(state, callTool, args['root-b'], before, waitMs));
  const steps = run.output.steps;
  run.output.roots = {
    invocations: state.invocations,
    before: steps.tool_before?.result?.text ?? null,
    after: steps.tool_after?.result?.text ?? null,
  };
}
