// An MCP server from the official SDK (Streamable HTTP, stateful sessions),
// run behind the gateway by tests/integration/test_mcp.py as a sandbox's app.
//
//   node server.mjs --port <n> [--log <file>]
//
// Prints "listening <port>" once it accepts connections. It binds 127.0.0.1
// with the SDK's DNS-rebinding protection on (createMcpExpressApp), so it only
// accepts Host: localhost[:port] or 127.0.0.1: the gateway's host:<n> =
// localhost mode. Tools: "echo" {text} answers the text; "notify" {text}
// answers at once and, 100 ms later, sends the text as a logging notification
// outside any request, which the SDK delivers on the session's GET stream.
// --log appends one JSON line per HTTP request: method, path, and the
// Authorization header as received (null when none reached the app).
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, v, i, a) => (i % 2 === 0 ? [...acc, [v.replace(/^--/, ''), a[i + 1]]] : acc), []));
const transports = new Map();

function newServer() {
    const server = new McpServer({ name: 'lizard-test-mcp', version: '1.0.0' }, { capabilities: { logging: {} } });
    server.registerTool('echo', { description: 'Answers its text', inputSchema: { text: z.string() } }, async ({ text }) => ({
        content: [{ type: 'text', text }],
    }));
    server.registerTool('notify', { description: 'Sends its text on the GET stream', inputSchema: { text: z.string() } }, async ({ text }) => {
        setTimeout(() => {
            server.server.notification({ method: 'notifications/message', params: { level: 'info', data: text } }).catch(() => {});
        }, 100);
        return { content: [{ type: 'text', text: 'scheduled' }] };
    });
    return server;
}

const app = createMcpExpressApp({ host: '127.0.0.1' });
app.use((req, res, next) => {
    if (args.log)
        fs.appendFileSync(args.log, JSON.stringify({ method: req.method, path: req.url, authorization: req.headers.authorization ?? null }) + '\n');
    next();
});

app.post('/mcp', async (req, res) => {
    const id = req.headers['mcp-session-id'];
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
        if (id || !isInitializeRequest(req.body)) {
            res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'no such session' }, id: null });
            return;
        }
        transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (sid) => transports.set(sid, transport),
        });
        transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
        await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, req.body);
});

async function bySession(req, res) {
    const transport = transports.get(req.headers['mcp-session-id']);
    if (!transport) {
        res.status(400).send('no such session');
        return;
    }
    await transport.handleRequest(req, res);
}
app.get('/mcp', bySession);
app.delete('/mcp', bySession);

const listener = app.listen(Number(args.port || 0), '127.0.0.1', () => {
    console.log(`listening ${listener.address().port}`);
});
