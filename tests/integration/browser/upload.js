#!/usr/bin/env node
// Drives Debian's headless Chromium through a streaming upload to a preview
// of lizard-gateway (../test_uploads.py::test_chromium_upload_streams). Run as:
//
//   node upload.js '<json config>'
//
// config: {executablePath, userDataDir, resolverRules, url (preview URL with
//          ?lizard_token=: the cookie), uploadId, mib (the body's size in MiB),
//          timeoutMs}
//
// Opens url, then from the page fetch()es a POST of /upload whose body is a
// ReadableStream (duplex "half": Chromium streams it, over HTTP/2) of `mib`
// pieces of 1 MiB, piece k filled with the byte k % 251. After the first half
// it prints {"half": true} and waits for the line "go" on stdin (the test
// waits for the app's first body byte in between), then sends the rest. Prints
// {"status", "body", "protocol"} of the answer, or {"error"}.
'use strict';

const readline = require('readline');
const { chromium } = require('playwright-core');

const lines = [];
const waiters = [];
readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const w = waiters.shift();
    if (w) w(line.trim());
    else lines.push(line.trim());
});
function nextLine() {
    if (lines.length) return Promise.resolve(lines.shift());
    return new Promise((resolve) => waiters.push(resolve));
}
function say(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
    const cfg = JSON.parse(process.argv[2]);
    let context;
    const out = {};
    try {
        context = await chromium.launchPersistentContext(cfg.userDataDir, {
            executablePath: cfg.executablePath,
            headless: true,
            ignoreHTTPSErrors: true,
            timeout: 60000,
            args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--no-proxy-server',
                '--ignore-certificate-errors', '--host-resolver-rules=' + cfg.resolverRules],
        });
        const page = context.pages()[0] || (await context.newPage());
        page.setDefaultTimeout(cfg.timeoutMs);
        // a fetch() that fails says only "Failed to fetch"; Chromium's net error (net::ERR_...) says why
        page.on('requestfailed', (r) => {
            out.failed = (out.failed || []).concat([r.method() + ' ' + r.url() + ': ' + (r.failure() || {}).errorText]);
        });
        await page.goto(cfg.url, { waitUntil: 'load' });
        await page.exposeFunction('__half', async () => {
            say({ half: true });
            return (await nextLine()) === 'go';
        });
        const res = await page.evaluate(async ({ mib, uploadId }) => {
            let k = 0;
            const body = new ReadableStream({
                async pull(controller) {
                    if (k === mib) {
                        controller.close();
                        return;
                    }
                    if (k === mib / 2 && !(await window.__half())) {
                        controller.error(new Error('not told to go on'));
                        return;
                    }
                    controller.enqueue(new Uint8Array(1024 * 1024).fill(k % 251));
                    k++;
                },
            });
            const r = await fetch('/upload', {
                method: 'POST',
                body: body,
                duplex: 'half',
                headers: { 'X-Upload-Id': uploadId, 'Content-Type': 'application/octet-stream' },
            });
            const entries = performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/upload'));
            return { status: r.status, body: await r.text(), protocol: entries.length ? entries[0].nextHopProtocol : null };
        }, { mib: cfg.mib, uploadId: cfg.uploadId });
        Object.assign(out, res);
    } catch (e) {
        out.error = e && e.stack ? e.stack : String(e);
        if (out.failed) out.error += ' [' + out.failed.join('; ') + ']';
    } finally {
        if (context) await context.close().catch(() => {});
    }
    say(out);
}

main().then(
    () => process.exit(0),
    (e) => {
        say({ error: String(e) });
        process.exit(1);
    },
);
