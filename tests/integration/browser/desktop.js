#!/usr/bin/env node
// Drives Debian's headless Chromium on a desktop port of lizard-gateway (the
// gateway-served noVNC viewer, CONTRACT.md "Desktops"); the assertions are in
// ../test_desktop_browser.py, which runs it as
//
//   node desktop.js '<json config>'
//
// config: {executablePath, userDataDir, resolverRules, timeoutMs}
//
// It then reads one JSON command a line on stdin and answers each with one
// JSON line on stdout ({"ok": true, ...} or {"ok": false, "error": ...}):
//
//   {"cmd": "open", "url": U}      navigate to U (following the gateway's
//                                  302s) and wait until noVNC says it is
//                                  connected: {url, connected, viewOnly}
//   {"cmd": "shot", "path": P}     a PNG screenshot of the page to P
//   {"cmd": "click", "x": X, "y": Y}  a click at (X, Y) of the noVNC canvas
//   {"cmd": "type", "text": T}     focus the canvas, type T (a "\n" is Enter)
//   {"cmd": "quit"}
'use strict';

const readline = require('readline');
const { chromium } = require('playwright-core');

function say(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

async function canvas(page) {
    const c = await page.waitForSelector('#noVNC_container canvas', { state: 'visible' });
    return c;
}

async function run(page, cmd, timeoutMs) {
    if (cmd.cmd === 'open') {
        await page.goto(cmd.url, { waitUntil: 'load' });
        let connected = true;
        try {
            await page.waitForFunction(() => document.documentElement.classList.contains('noVNC_connected'), null, {
                timeout: timeoutMs,
            });
        } catch (e) {
            connected = false;
        }
        const status = await page.evaluate(() => {
            const s = document.getElementById('noVNC_status');
            return s ? s.textContent : null;
        });
        const viewOnly = await page.evaluate(() => new URLSearchParams(location.search).get('view_only'));
        return { url: page.url(), connected: connected, status: status, viewOnly: viewOnly };
    }
    if (cmd.cmd === 'shot') {
        await page.screenshot({ path: cmd.path, type: 'png' });
        return {};
    }
    if (cmd.cmd === 'click') {
        const c = await canvas(page);
        await c.click({ position: { x: cmd.x, y: cmd.y } });
        return {};
    }
    if (cmd.cmd === 'type') {
        const c = await canvas(page);
        await c.focus();
        for (const ch of cmd.text) {
            if (ch === '\n') await page.keyboard.press('Enter');
            else await page.keyboard.type(ch);
        }
        return {};
    }
    throw new Error('unknown command ' + cmd.cmd);
}

async function main() {
    const cfg = JSON.parse(process.argv[2]);
    const timeoutMs = cfg.timeoutMs || 30000;
    const args = [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-proxy-server',
        '--ignore-certificate-errors',
    ];
    if (cfg.resolverRules) args.push('--host-resolver-rules=' + cfg.resolverRules);
    const context = await chromium.launchPersistentContext(cfg.userDataDir, {
        executablePath: cfg.executablePath,
        headless: true,
        ignoreHTTPSErrors: true,
        timeout: 60000,
        viewport: { width: 800, height: 600 },
        args: args,
    });
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(timeoutMs);
    say({ ready: true });
    const lines = readline.createInterface({ input: process.stdin });
    for await (const line of lines) {
        const cmd = JSON.parse(line);
        if (cmd.cmd === 'quit') break;
        try {
            say(Object.assign({ ok: true }, await run(page, cmd, timeoutMs)));
        } catch (e) {
            say({ ok: false, error: String(e) });
        }
    }
    await context.close();
}

main().catch((e) => {
    say({ ok: false, error: String(e && e.stack ? e.stack : e) });
    process.exit(1);
});
