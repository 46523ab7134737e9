#!/usr/bin/env node
// Cross-origin fetch() from a page in Debian's headless Chromium, for
// ../test_cors_edge.py: opens cfg.pageUrl (a page of some origin), then runs
// each of cfg.fetches in it, one after the other, and prints one JSON object:
// {results: [{ok, status, body, headers: {<name>: value as JS reads it}} or
// {error}], requests: [the requests Chromium made, method and URL]}.
//
//   node cors.js '{"executablePath", "resolverRules", "pageUrl", "fetches": [{"url", "init", "read": [header names]}]}'
'use strict';

const { chromium } = require('playwright-core');

async function main() {
    const cfg = JSON.parse(process.argv[2]);
    const out = { results: [], requests: [], console: [] };
    let browser;
    try {
        browser = await chromium.launch({
            executablePath: cfg.executablePath,
            headless: true,
            timeout: 60000,
            args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
                '--disable-component-update', '--disable-sync', '--no-proxy-server', '--ignore-certificate-errors',
                '--host-resolver-rules=' + cfg.resolverRules],
        });
        const context = await browser.newContext({ ignoreHTTPSErrors: true });
        const page = await context.newPage();
        page.setDefaultTimeout(15000);
        page.on('console', (m) => out.console.push(m.text()));
        page.on('request', (r) => out.requests.push({ method: r.method(), url: r.url() }));
        await page.goto(cfg.pageUrl);
        for (const f of cfg.fetches) {
            out.results.push(await page.evaluate(async ([url, init, read]) => {
                try {
                    const res = await fetch(url, init);
                    const headers = {};
                    for (const name of read) headers[name] = res.headers.get(name);
                    return { ok: res.ok, status: res.status, body: await res.text(), headers };
                } catch (e) {
                    return { error: String(e) };
                }
            }, [f.url, f.init || {}, f.read || []]));
        }
    } catch (e) {
        out.error = e && e.stack ? e.stack : String(e);
    } finally {
        if (browser) await browser.close().catch(() => {});
    }
    process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), (e) => {
    process.stdout.write(JSON.stringify({ error: String(e) }) + '\n');
    process.exit(1);
});
