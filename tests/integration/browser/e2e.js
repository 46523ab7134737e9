#!/usr/bin/env node
// Drives Debian's headless Chromium through a preview of lizard-gateway and
// prints what it observed as one JSON object on stdout; the assertions are in
// ../test_browser_e2e.py. Run by that test as:
//
//   node e2e.js '<json config>'
//
// config: {executablePath, userDataDir, resolverRules, scenario: "top" | "iframe",
//          url (preview URL with ?lizard_token=), parentUrl (iframe scenario),
//          previewHost (host name of the preview), timeoutMs}
//
// "top":    open url, read the landing page, follow the link #next, then
//           fetch() a POST from the page using only the cookie, then open a
//           WebSocket to wss://<same host>/ws?via=page (the cookie is all it
//           carries), send one message and wait for the app's echo.
// "iframe": open parentUrl (another origin) whose <iframe> loads url, and do
//           the same inside the frame.
'use strict';

const { chromium } = require('playwright-core');

async function findFrame(page, host, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const f = page.frames().find((fr) => fr !== page.mainFrame() && fr.url().includes(host));
        if (f) return f;
        if (Date.now() > deadline) throw new Error('no frame for ' + host + ' (frames: ' + page.frames().map((fr) => fr.url()).join(', ') + ')');
        await new Promise((r) => setTimeout(r, 50));
    }
}

async function bodyText(target) {
    try {
        return await target.evaluate(() => (document.body ? document.body.innerText : ''));
    } catch (e) {
        return 'ERROR reading body: ' + e.message;
    }
}

// Does the steps in `target` (a Page or a Frame) and fills `out`.
async function exercise(target, out, timeoutMs) {
    out.landed_url = target.url();
    out.landed_text = await bodyText(target);
    const title = await target.$('#title');
    if (!title) {
        out.error = 'the app page did not load';
        return;
    }
    out.landed_title = await title.textContent();

    await Promise.all([
        target.waitForURL(/\/page2/, { timeout: timeoutMs }),
        target.click('#next', { timeout: timeoutMs }),
    ]);
    await target.waitForLoadState('load');
    out.after_click_url = target.url();
    out.after_click_text = await bodyText(target);
    out.after_click_title = await target.evaluate(() => {
        const el = document.getElementById('title');
        return el ? el.textContent : null;
    });

    out.fetch = await target.evaluate(async () => {
        try {
            const r = await fetch('/api/data?via=fetch', {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ hello: 'gateway' }),
            });
            return { status: r.status, body: await r.text() };
        } catch (e) {
            return { status: 0, error: String(e) };
        }
    });
    out.document_cookie = await target.evaluate(() => document.cookie);

    out.websocket = await target.evaluate(
        (ms) =>
            new Promise((resolve) => {
                const url = 'wss://' + location.host + '/ws?via=page';
                const res = { url: url };
                let ws;
                const timer = setTimeout(() => {
                    res.error = 'no echo within ' + ms + ' ms';
                    resolve(res);
                }, ms);
                try {
                    ws = new WebSocket(url);
                } catch (e) {
                    clearTimeout(timer);
                    res.error = String(e);
                    resolve(res);
                    return;
                }
                ws.onopen = () => {
                    res.opened = true;
                    ws.send('hello over websocket');
                };
                ws.onmessage = (e) => {
                    clearTimeout(timer);
                    res.echo = String(e.data);
                    ws.close(1000, 'done');
                    resolve(res);
                };
                ws.onclose = (e) => {
                    if (res.echo === undefined) {
                        clearTimeout(timer);
                        res.error = 'closed before the echo: code ' + e.code;
                        resolve(res);
                    }
                };
            }),
        timeoutMs,
    );
}

async function main() {
    const cfg = JSON.parse(process.argv[2]);
    const timeoutMs = cfg.timeoutMs || 15000;
    const out = { scenario: cfg.scenario, console: [], responses: [] };
    let context;
    try {
        context = await chromium.launchPersistentContext(cfg.userDataDir, {
            executablePath: cfg.executablePath,
            headless: true,
            ignoreHTTPSErrors: true,
            timeout: 60000,
            args: [
                '--no-sandbox',
                '--disable-gpu',
                '--disable-quic',
                '--no-first-run',
                '--disable-background-networking',
                '--disable-component-update',
                '--disable-sync',
                '--no-proxy-server',
                '--ignore-certificate-errors',
                '--host-resolver-rules=' + cfg.resolverRules,
            ],
        });
        const page = context.pages()[0] || (await context.newPage());
        page.setDefaultTimeout(timeoutMs);
        page.on('console', (m) => out.console.push(m.type() + ': ' + m.text()));
        page.on('response', (r) => {
            const h = r.headers();
            out.responses.push({ url: r.url(), status: r.status(), location: h.location || null, set_cookie: h['set-cookie'] || null });
        });

        if (cfg.scenario === 'top') {
            await page.goto(cfg.url, { waitUntil: 'load' });
            await exercise(page, out, timeoutMs);
        } else if (cfg.scenario === 'iframe') {
            await page.goto(cfg.parentUrl, { waitUntil: 'load' });
            out.parent_url = page.url();
            const frame = await findFrame(page, cfg.previewHost, timeoutMs);
            await frame.waitForLoadState('load');
            // the 302 inside the frame: wait until the frame is on the app (or an error page)
            await frame.waitForFunction(() => document.readyState === 'complete' && !!document.body, null, { timeout: timeoutMs });
            await exercise(frame, out, timeoutMs);
        } else {
            throw new Error('unknown scenario ' + cfg.scenario);
        }
        out.cookies = (await context.cookies()).map((c) => ({
            name: c.name,
            domain: c.domain,
            path: c.path,
            secure: c.secure,
            httpOnly: c.httpOnly,
            sameSite: c.sameSite,
            partitionKey: c.partitionKey || null,
        }));
    } catch (e) {
        out.error = (out.error ? out.error + '; ' : '') + (e && e.stack ? e.stack : String(e));
    } finally {
        if (context) await context.close().catch(() => {});
    }
    process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(
    () => process.exit(0),
    (e) => {
        process.stdout.write(JSON.stringify({ error: String(e) }) + '\n');
        process.exit(1);
    },
);
