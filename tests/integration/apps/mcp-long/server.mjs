// An MCP server of the official SDK over Streamable HTTP with JSON answers
// (enableJsonResponse: one JSON body per call, nothing sent while the tool
// runs), stateless. Its tool "sleep" answers after `seconds` of silence: a
// long tool call, as code-execution MCP servers make them.
//     node server.mjs <port>        prints "listening <port>"
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

function newServer() {
    const server = new McpServer({ name: 'lizard-long-call', version: '1.0.0' });
    server.registerTool('sleep', { description: 'Answers after the given seconds', inputSchema: { seconds: z.number() } },
        async ({ seconds }) => {
            await new Promise(resolve => setTimeout(resolve, seconds * 1000));
            return { content: [{ type: 'text', text: `slept ${seconds} s` }] };
        });
    return server;
}

const httpServer = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
});
// Node's own limits would end a ten-minute call before any gateway does
httpServer.requestTimeout = 0;
httpServer.headersTimeout = 0;
httpServer.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
    console.log(`listening ${httpServer.address().port}`);
});
