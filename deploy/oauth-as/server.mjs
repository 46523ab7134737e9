// An example OAuth 2.1 authorization server for lizard-gateway, built on the
// MCP SDK's own authorization server (mcpAuthRouter: RFC 8414 metadata,
// dynamic client registration, authorization code with PKCE, refresh). Its
// access tokens are share links (CONTRACT.md "Share links"), signed with the
// gateway's link keys, so the gateways verify them offline, exactly as a
// share link minted by `lizard-gateway sign-link`.
//
// THIS EXAMPLE APPROVES EVERY AUTHORIZATION AT ONCE, FOR ANY SANDBOX UNDER
// ITS DOMAINS: it is for tests and demos. A real deployment keeps the token
// side (mint_link below) and replaces authorize() with the platform's login,
// a consent page, and a check that the signed-in user may open that sandbox's
// port; it serves https, stores clients and codes somewhere durable, and is
// listed in the gateways' auth.oauth_authorization_servers. docs/mcp.md: "MCP
// servers in sandboxes".
//
// Environment:
//   LIZARD_AS_ISSUER     its issuer URL, e.g. https://auth.lizard.app (http only for 127.0.0.1/localhost)
//   LIZARD_AS_LISTEN     [host:]port to listen on (default 127.0.0.1:9400)
//   LIZARD_LINK_KEYS     the gateways' share-link keys, lines <kid>:<secret>; the first signs
//   LIZARD_DOMAINS       the preview domains, comma-separated (a resource on another host is refused)
//   LIZARD_LINK_TTL_S    access token lifetime (default 3600; at most the gateways' auth.link_max_ttl_s)
//   LIZARD_REDIS         host:port of the platform's Redis, to read link_epoch (absent: epoch 0)
//   LIZARD_REDIS_PREFIX  key prefix (default lizard:)
import { createHmac, randomBytes } from 'node:crypto';
import net from 'node:net';
import express from 'express';
import { mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { InvalidGrantError, InvalidTargetError } from '@modelcontextprotocol/sdk/server/auth/errors.js';

const env = process.env;
const issuer = new URL(env.LIZARD_AS_ISSUER ?? 'http://127.0.0.1:9400');
const [listenHost, listenPort] = (env.LIZARD_AS_LISTEN ?? '127.0.0.1:9400').includes(':')
    ? env.LIZARD_AS_LISTEN.split(':')
    : ['127.0.0.1', env.LIZARD_AS_LISTEN];
const domains = (env.LIZARD_DOMAINS ?? '').split(',').map((d) => d.trim().toLowerCase()).filter(Boolean);
const ttl = Number(env.LIZARD_LINK_TTL_S ?? 3600);
const prefix = env.LIZARD_REDIS_PREFIX ?? 'lizard:';
const keys = (env.LIZARD_LINK_KEYS ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]);
if (keys.length === 0 || keys[0][1].length < 32 || domains.length === 0) {
    console.error('oauth-as: LIZARD_LINK_KEYS (<kid>:<secret of 32+ bytes>) and LIZARD_DOMAINS are required');
    process.exit(2);
}

const b64url = (buf) => Buffer.from(buf).toString('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

// The sandbox and port a resource URL names: https://<port>-<sandboxId>.<domain>[:<port>]/...
function previewOf(resource) {
    const host = resource.hostname.toLowerCase();
    const domain = domains.find((d) => host.endsWith('.' + d));
    const m = domain && /^([1-9][0-9]{0,4})-([a-z0-9]{1,56})$/.exec(host.slice(0, -domain.length - 1));
    if (!m || Number(m[1]) > 65535) throw new InvalidTargetError(`not a preview of this platform: ${resource.href}`);
    return { sandbox: m[2], port: Number(m[1]) };
}

// HGET <prefix>sbx:{<id>} link_epoch over one short RESP connection; absent = 0.
function linkEpoch(sandbox) {
    if (!env.LIZARD_REDIS) return Promise.resolve(0);
    const [host, port] = env.LIZARD_REDIS.split(':');
    const key = `${prefix}sbx:{${sandbox}}`;
    const cmd = `*3\r\n$4\r\nHGET\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n$10\r\nlink_epoch\r\n`;
    return new Promise((resolve, reject) => {
        let data = '';
        const sock = net.connect(Number(port), host, () => sock.write(cmd));
        sock.setTimeout(3000, () => sock.destroy(new Error('redis: timeout')));
        sock.on('error', reject);
        sock.on('data', (chunk) => {
            data += chunk;
            const m = /^(\$-1\r\n|\$\d+\r\n(\d+)\r\n|-(.*)\r\n)/.exec(data);
            if (!m) return;
            sock.end();
            if (m[3]) reject(new Error('redis: ' + m[3]));
            else resolve(m[2] ? Number(m[2]) : 0);
        });
    });
}

// A share link for (sandbox, port): the access token the gateways verify offline.
async function mintLink(sandbox, port) {
    const [kid, secret] = keys[0];
    const exp = Math.floor(Date.now() / 1000) + ttl;
    const payload = b64url(`${sandbox}|${port}|${exp}|${await linkEpoch(sandbox)}|${kid}`);
    const sig = b64url(createHmac('sha256', secret).update('lzs1.' + payload).digest());
    return { token: `lzs1.${payload}.${sig}`, exp };
}

const clients = new Map();
const codes = new Map(); // code -> {clientId, challenge, redirectUri, preview}
const refreshTokens = new Map(); // token -> {clientId, preview}

async function tokensFor(clientId, preview) {
    const { token, exp } = await mintLink(preview.sandbox, preview.port);
    const refresh = b64url(randomBytes(32));
    refreshTokens.set(refresh, { clientId, preview });
    return { access_token: token, token_type: 'Bearer', expires_in: exp - Math.floor(Date.now() / 1000), refresh_token: refresh };
}

const provider = {
    clientsStore: {
        getClient: (id) => clients.get(id),
        registerClient: (client) => {
            clients.set(client.client_id, client);
            return client;
        },
    },
    // Approves at once (see the top of this file): a real server signs the user in and asks here.
    async authorize(client, params, res) {
        if (!params.resource) throw new InvalidTargetError('the resource parameter (the preview URL) is required');
        const preview = previewOf(params.resource);
        const code = b64url(randomBytes(24));
        codes.set(code, { clientId: client.client_id, challenge: params.codeChallenge, redirectUri: params.redirectUri, preview });
        const target = new URL(params.redirectUri);
        target.searchParams.set('code', code);
        if (params.state !== undefined) target.searchParams.set('state', params.state);
        res.redirect(302, target.href);
    },
    async challengeForAuthorizationCode(client, code) {
        const c = codes.get(code);
        if (!c || c.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
        return c.challenge;
    },
    async exchangeAuthorizationCode(client, code, _verifier, redirectUri) {
        const c = codes.get(code);
        if (!c || c.clientId !== client.client_id || (redirectUri && redirectUri !== c.redirectUri))
            throw new InvalidGrantError('unknown authorization code');
        codes.delete(code);
        return tokensFor(client.client_id, c.preview);
    },
    async exchangeRefreshToken(client, refreshToken) {
        const r = refreshTokens.get(refreshToken);
        if (!r || r.clientId !== client.client_id) throw new InvalidGrantError('unknown refresh token');
        refreshTokens.delete(refreshToken);
        return tokensFor(client.client_id, r.preview);
    },
    // The gateways verify the links themselves; this only reads one back (the interface asks for it).
    async verifyAccessToken(token) {
        const [, payload] = token.split('.');
        const [sandbox, port, exp] = Buffer.from(payload, 'base64url').toString().split('|');
        return { token, clientId: 'lizard', scopes: [], expiresAt: Number(exp), extra: { sandbox, port: Number(port) } };
    },
};

const app = express();
app.set('trust proxy', false);
app.use(mcpAuthRouter({ provider, issuerUrl: issuer }));
const server = app.listen(Number(listenPort), listenHost, () => {
    console.log(`listening ${server.address().port}`);
});
