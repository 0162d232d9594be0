#!/usr/bin/env node
// OAuth client driver on @modelcontextprotocol/sdk 1.x (its client auth: an
// OAuthClientProvider given to StreamableHTTPClientTransport).
//   node oauth_client_sdk1.mjs --url URL
// Starts unauthenticated; on the 401 the SDK discovers, registers and sends the
// "user" to the authorization URL, which approves at once (one fetch whose
// redirect carries the code); then finishAuth(code) and connect again.
// Prints one JSON object: {sdk, protocolVersion, echo, whoami, authorized_at, error?}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { pkgVersion } from './lib/common.mjs';

const url = new URL(process.argv[process.argv.indexOf('--url') + 1]);
const REDIRECT = 'http://127.0.0.1:9/callback'; // never contacted
const out = { sdk: `typescript-sdk ${pkgVersion('@modelcontextprotocol/sdk')}`, authorized_at: [] };
const store = {};
let code = null;

const provider = {
  get redirectUrl() { return REDIRECT; },
  get clientMetadata() {
    return {
      client_name: 'oauth-peer-ts',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    };
  },
  clientInformation() { return store.client; },
  saveClientInformation(info) { store.client = info; },
  tokens() { return store.tokens; },
  saveTokens(tokens) { store.tokens = tokens; },
  saveCodeVerifier(verifier) { store.verifier = verifier; },
  codeVerifier() { return store.verifier; },
  async redirectToAuthorization(authorizationUrl) {
    out.authorized_at.push(authorizationUrl.origin + authorizationUrl.pathname);
    const response = await fetch(authorizationUrl, { redirect: 'manual' });
    const location = response.headers.get('location') || '';
    if (!location.startsWith(REDIRECT)) throw new Error(`authorization answered ${response.status}`);
    code = new URL(location).searchParams.get('code');
  },
};

const text = (result) => result.content.map((block) => block.text || '').join(' ');

async function connect() {
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  const client = new Client({ name: 'oauth-peer-ts', version: '0' });
  await client.connect(transport);
  return { client, transport };
}

try {
  let connected;
  try {
    connected = await connect();
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || code === null) throw error;
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await transport.finishAuth(code);
    connected = await connect();
  }
  const { client, transport } = connected;
  out.protocolVersion = transport.protocolVersion ?? null;
  out.echo = text(await client.callTool({ name: 'echo', arguments: { text: 'through' } }));
  out.whoami = text(await client.callTool({ name: 'whoami', arguments: {} }));
  await client.close();
} catch (error) {
  out.error = `${error?.name}: ${error?.message}`;
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
