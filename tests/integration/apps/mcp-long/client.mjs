// The official SDK's MCP client calling the tool "sleep" of server.mjs
// through the gateway: prints the tool's text, or "error <message>" and
// exits 1.
//     NODE_EXTRA_CA_CERTS=ca.pem node client.mjs <url> <seconds> [token]
// Names under .lizard.test resolve to 127.0.0.1 (the tests' gateway).
import dns from 'node:dns';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const lookup = dns.lookup;
dns.lookup = (hostname, options, cb) => {
    if (typeof options === 'function') { cb = options; options = {}; }
    if (!hostname.endsWith('.lizard.test')) return lookup(hostname, options, cb);
    return options && options.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4);
};

const [url, seconds, token] = process.argv.slice(2);
const headers = token ? { 'X-Lizard-Access-Token': token } : {};
const client = new Client({ name: 'lizard-test-client', version: '1.0.0' });
try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
    // the SDK's own default (60 s) would give up first
    const result = await client.callTool({ name: 'sleep', arguments: { seconds: Number(seconds) } }, undefined,
                                          { timeout: 900000 });
    console.log(result.content[0].text);
    await client.close();
} catch (e) {
    console.log(`error ${e.message}`);
    process.exit(1);
}
