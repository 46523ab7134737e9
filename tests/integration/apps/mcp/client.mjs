// An MCP client from the official SDK, run by tests/integration/test_mcp.py
// against an MCP server behind the gateway.
//
//   node client.mjs --url https://<port>-<id>.lizard.test:<tls port>/mcp (--bearer <token> | --oauth)
//
// *.lizard.test resolves to 127.0.0.1 (the test's DNS); the test CA comes
// from NODE_EXTRA_CA_CERTS. --bearer: the only credential is the header
// Authorization: Bearer <token> (what connectors that allow no other header
// send). --oauth: no credential at all; the SDK's OAuth client discovers the
// authorization server from the gateway's 401 (RFC 9728), registers,
// authorizes (the example server approves at once: redirectToAuthorization
// follows its 302 without a browser), exchanges the code for a token (a share
// link) and retries with Authorization: Bearer. Then, either way: tools/list,
// tools/call echo, tools/call notify and the notification that follows on
// the session's GET stream. Prints one JSON object: what it saw.
import dns from 'node:dns';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const lookup = dns.lookup;
dns.lookup = (host, opts, cb) => {
    if (typeof opts === 'function') [cb, opts] = [opts, {}];
    if (!host.endsWith('.lizard.test')) return lookup(host, opts, cb);
    return opts && opts.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4);
};

const args = {};
for (let i = 2; i < process.argv.length; i++) {
    const k = process.argv[i].replace(/^--/, '');
    args[k] = process.argv[i + 1] && !process.argv[i + 1].startsWith('--') ? process.argv[++i] : true;
}
const url = new URL(args.url);
const seen = { requests: [] };

// Every request the SDK makes, with its status and the challenge it got (no credential is printed).
async function tracingFetch(input, init) {
    const res = await fetch(input, init);
    seen.requests.push({ method: init?.method ?? 'GET', url: String(input), status: res.status, www_authenticate: res.headers.get('www-authenticate') });
    return res;
}

class AutoApproveProvider {
    constructor() {
        this.store = {};
    }
    get redirectUrl() {
        return 'http://127.0.0.1:1/callback';
    }
    get clientMetadata() {
        return { client_name: 'lizard test client', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
    }
    clientInformation() {
        return this.store.client;
    }
    saveClientInformation(info) {
        this.store.client = info;
    }
    tokens() {
        return this.store.tokens;
    }
    saveTokens(tokens) {
        this.store.tokens = tokens;
        seen.token_is_share_link = tokens.access_token.startsWith('lzs1.');
    }
    saveCodeVerifier(v) {
        this.store.verifier = v;
    }
    codeVerifier() {
        return this.store.verifier;
    }
    // A browser would show the authorization server's page; it approves at once and redirects with the code.
    async redirectToAuthorization(authorizationUrl) {
        const res = await fetch(authorizationUrl, { redirect: 'manual' });
        const location = res.headers.get('location');
        seen.authorization_status = res.status;
        this.store.code = location ? new URL(location).searchParams.get('code') : null;
    }
}

function newTransport(provider) {
    const opts = { fetch: tracingFetch };
    if (args.bearer) opts.requestInit = { headers: { Authorization: `Bearer ${args.bearer}` } };
    if (provider) opts.authProvider = provider;
    return new StreamableHTTPClientTransport(url, opts);
}

async function main() {
    const provider = args.oauth ? new AutoApproveProvider() : undefined;
    let client = new Client({ name: 'lizard-test-client', version: '1.0.0' });
    let transport = newTransport(provider);
    try {
        await client.connect(transport);
    } catch (e) {
        if (!(provider && e instanceof UnauthorizedError)) throw e;
        seen.unauthorized_first = true;
        await transport.finishAuth(provider.store.code);
        client = new Client({ name: 'lizard-test-client', version: '1.0.0' });
        transport = newTransport(provider);
        await client.connect(transport);
    }
    const notified = new Promise((resolve) => client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => resolve(n.params.data)));
    seen.session = Boolean(transport.sessionId);
    seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
    seen.echo = (await client.callTool({ name: 'echo', arguments: { text: 'hello through the gateway' } })).content[0].text;
    await client.callTool({ name: 'notify', arguments: { text: 'from the GET stream' } });
    seen.notification = await Promise.race([notified, new Promise((_, reject) => setTimeout(() => reject(new Error('no notification in 10 s')), 10000))]);
    await transport.terminateSession().catch(() => {});
    await client.close();
}

main().then(
    () => {
        console.log(JSON.stringify(seen));
        process.exit(0);
    },
    (e) => {
        seen.error = String(e && e.stack ? e.stack : e);
        console.log(JSON.stringify(seen));
        process.exit(1);
    },
);
