#!/usr/bin/env node
// Opens a Vite dev server through a preview of lizard-gateway in Debian's
// headless Chromium and watches an HMR edit reach the page; the assertions
// are in ../test_real_apps.py. Run by that test as:
//
//   node vite_hmr.js '<json config>'
//
// config: {executablePath, userDataDir, resolverRules, url (preview URL with
//          ?lizard_token=), selector, initial, edited, timeoutMs}
//
// Prints {"ready": ...} once the page shows `initial` and Vite's client has
// logged "[vite] connected."; then waits for the stdin line "edited" (the
// test has changed the source file), waits for `selector` to show `edited`,
// and prints the result: whether it arrived, whether the page reloaded (a
// marker set before the edit must still be there), the console lines, and
// the WebSocket handshakes as the DevTools protocol saw them (ws_handshakes:
// status, request headers).
'use strict';

const readline = require('readline');
const { chromium } = require('playwright-core');

const cfg = JSON.parse(process.argv[2]);
const lines = [];
const waiters = [];
readline.createInterface({ input: process.stdin }).on('line', (l) => {
    const w = waiters.shift();
    if (w) w(l.trim());
    else lines.push(l.trim());
});
const nextLine = () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => waiters.push(r)));
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

async function waitFor(pred, ms) {
    const t0 = Date.now();
    for (;;) {
        if (await pred()) return true;
        if (Date.now() - t0 > ms) return false;
        await new Promise((r) => setTimeout(r, 20));
    }
}

(async () => {
    const out = { console: [], navigations: 0 };
    const args = ['--no-sandbox', '--disable-gpu', '--ignore-certificate-errors'];
    if (cfg.resolverRules) args.push('--host-resolver-rules=' + cfg.resolverRules);
    const ctx = await chromium.launchPersistentContext(cfg.userDataDir, {
        executablePath: cfg.executablePath,
        headless: true,
        args: args,
        ignoreHTTPSErrors: true,
    });
    try {
        const page = ctx.pages()[0] || (await ctx.newPage());
        page.on('console', (m) => out.console.push(m.text()));
        // the WebSocket handshakes as Chromium's DevTools protocol sees them: over HTTP/2 (extended CONNECT) the
        // answer is a 200, over HTTP/1.1 a 101
        out.ws_handshakes = [];
        const cdp = await ctx.newCDPSession(page);
        await cdp.send('Network.enable');
        cdp.on('Network.webSocketHandshakeResponseReceived', (e) =>
            out.ws_handshakes.push({ status: e.response.status, requestHeaders: e.response.requestHeaders || {} }),
        );
        page.on('framenavigated', (f) => {
            if (f === page.mainFrame()) out.navigations++;
        });
        await page.goto(cfg.url, { waitUntil: 'load', timeout: cfg.timeoutMs });
        out.landed_url = page.url();
        const text = () => page.evaluate((s) => (document.querySelector(s) || {}).textContent, cfg.selector);
        out.initial_seen = await waitFor(async () => (await text()) === cfg.initial, cfg.timeoutMs);
        out.connected = await waitFor(async () => out.console.some((l) => l.includes('[vite] connected')), cfg.timeoutMs);
        await page.evaluate(() => {
            window.__beforeEdit = 'still here';
        });
        const navBefore = out.navigations;
        say({ ready: true, initial_seen: out.initial_seen, connected: out.connected, text: await text() });
        if ((await nextLine()) !== 'edited') throw new Error('expected "edited" on stdin');
        const t0 = Date.now();
        out.edit_seen = await waitFor(async () => (await text()) === cfg.edited, cfg.timeoutMs);
        out.edit_ms = Date.now() - t0;
        out.text_after = await text();
        out.marker = await page.evaluate(() => window.__beforeEdit || null);
        out.navigations_after_edit = out.navigations - navBefore;
    } catch (e) {
        out.error = String(e && e.stack ? e.stack : e);
    } finally {
        await ctx.close();
    }
    say({ done: true, result: out });
})();
