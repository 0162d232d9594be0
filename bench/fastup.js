// A cheap MCP upstream for bench.lanes --pinned: Node's own http module, no SDK.
//
//     node bench/fastup.js legacy|modern PORT
//
// legacy: a 2025-11-25 server (initialize mints an Mcp-Session-Id, every later
// request must carry one); modern: a 2026-07-28 server (server/discover, resultType,
// no session; refuses a request without MCP-Protocol-Version: 2026-07-28).  Both
// answer tools/list and tools/call echo as one JSON body.  Why Node: the pinned
// measure shares a core between the load and the upstream, and must leave the
// middle alone as what limits; Node answers a call in a fraction of a Python
// server's CPU.  Prints its URL once listening.
"use strict";

const http = require("http");
const crypto = require("crypto");

const [kind, port] = process.argv.slice(2);
if (!["legacy", "modern"].includes(kind) || !port) {
  console.error("usage: node bench/fastup.js legacy|modern PORT");
  process.exit(2);
}
const MODERN = "2026-07-28";
const LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const ECHO = {
  name: "echo",
  description: "Echo text back",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};

function send(res, status, message, headers = {}) {
  const body = message === null ? "" : JSON.stringify(message);
  const head = { ...headers, "Content-Length": Buffer.byteLength(body) };
  if (message !== null) head["Content-Type"] = "application/json";
  res.writeHead(status, head);
  res.end(body);
}

function error(id, code, message) {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

function answer(method, params, req) {
  // The result of one request, or null: the method is not served.
  if (method === "initialize") {
    const asked = params.protocolVersion;
    return {
      protocolVersion: LEGACY.includes(asked) ? asked : LEGACY[0],
      capabilities: { tools: {} },
      serverInfo: { name: "bench-fastup", version: "0" },
    };
  }
  if (method === "server/discover") {
    return {
      supportedVersions: [MODERN],
      capabilities: { tools: {} },
      _meta: { "io.modelcontextprotocol/serverInfo": { name: "bench-fastup", version: "0" } },
    };
  }
  if (method === "tools/list") return { tools: [ECHO] };
  if (method === "tools/call" && params.name === "echo") {
    const text = String((params.arguments || {}).text ?? "");
    return { content: [{ type: "text", text }] };
  }
  if (method === "ping") return {};
  return null;
}

function handle(req, res, raw) {
  let message;
  try {
    message = JSON.parse(raw);
  } catch {
    return send(res, 400, error(null, -32700, "Parse error"));
  }
  const id = message.id ?? null;
  const method = message.method;
  const headers = {};
  if (kind === "modern" && req.headers["mcp-protocol-version"] !== MODERN) {
    return send(res, 400, error(id, -32022, "Unsupported protocol version"));
  }
  if (kind === "legacy") {
    if (method === "initialize") headers["Mcp-Session-Id"] = crypto.randomUUID();
    else if (!req.headers["mcp-session-id"]) {
      return send(res, 400, error(id, -32600, "Bad Request: no session"));
    }
  }
  if (id === null) return send(res, 202, null);
  let result = answer(method, message.params || {}, req);
  if (result === null) return send(res, 200, error(id, -32601, `Method not found: ${method}`));
  if (kind === "modern") result = { resultType: "complete", ...result };
  send(res, 200, { jsonrpc: "2.0", id, result }, headers);
}

const server = http.createServer((req, res) => {
  if (req.url !== "/mcp") return send(res, 404, null);
  if (req.method === "DELETE") return send(res, 204, null);
  if (req.method !== "POST") return send(res, 405, null, { Allow: "POST, DELETE" });
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => handle(req, res, Buffer.concat(chunks).toString("utf8")));
});
server.keepAliveTimeout = 60000;
server.listen(Number(port), "127.0.0.1", () => {
  console.log(`http://127.0.0.1:${port}/mcp`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
