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
// "query":  open parentUrl (a page of another origin), then from it a
//           cross-origin fetch() of fetchUrl and an EventSource on eventsUrl,
//           both carrying ?lizard_token= (no cookie can exist yet).
// "revoke": open url (the cookie is set), open a WebSocket to otherWsUrl
//           (another sandbox), then for each of `rounds` rounds: open a
//           WebSocket to wss://<same host>/ws and show that both echo, print
//           {"ready": n}; on the stdin line "check" echo on both again and
//           print {"checked": n}; on "go" wait up to waitMs for the first one
//           to be closed by the gateway, echo on the other, print {"round": n,
//           ...}; then wait for "next". The test drives Redis in between.
// "warning": from parentUrl (another origin) fetch() fetchUrl on a public
//           port with auth.public_warning (not a navigation: it must reach the
//           app), then open url there: read the warning page, press its
//           Continue button with the keyboard, then on the app do what "top"
//           does.
// "attack": open parentUrl, a page of another site (the attacker's). Without
//           clickInFrame it auto-submits a form to the preview by itself (no
//           click); with clickInFrame it frames the preview, whose own page
//           holds a button posting to the top, and the victim clicks it once.
//           Reports where the top level landed and what it shows, then opens
//           url (the preview) again and reports that too.
// "load":   open each of urls (no certificate errors ignored: the CA must be
//           trusted) and report each landing's URL, title and error.
// "planted": open url (a public port with auth.public_warning: the warning
//           page, and this browser's nonce cookie), then add `plant` to the
//           browser's cookies (a consent given in another browser, as a
//           planted cookie would be), open url again and report what shows,
//           then press Continue, report where it lands, and open url once
//           more.
'use strict';

const readline = require('readline');
const { chromium } = require('playwright-core');

// Lines from stdin, one at a time (the test's commands in "revoke").
const stdinLines = [];
const stdinWaiters = [];
readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const w = stdinWaiters.shift();
    if (w) w(line.trim());
    else stdinLines.push(line.trim());
});
function nextLine(timeoutMs) {
    if (stdinLines.length) return Promise.resolve(stdinLines.shift());
    return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no command on stdin within ' + timeoutMs + ' ms')), timeoutMs);
        stdinWaiters.push((l) => {
            clearTimeout(t);
            resolve(l);
        });
    });
}
function say(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

// In the page: WebSockets by name, with the time each was closed.
const PAGE_WS_HELPERS = () => {
    window.__ws = {};
    window.__closed = {};
    window.__open = (name, url, ms) =>
        new Promise((resolve) => {
            const ws = new WebSocket(url);
            const t = setTimeout(() => resolve('no open within ' + ms + ' ms'), ms);
            window.__closed[name] = null;
            ws.onopen = () => {
                clearTimeout(t);
                resolve('open');
            };
            ws.onclose = (e) => {
                window.__closed[name] = { at: Date.now(), code: e.code };
                clearTimeout(t);
                resolve('closed: ' + e.code);
            };
            window.__ws[name] = ws;
        });
    window.__echo = (name, text, ms) =>
        new Promise((resolve) => {
            const ws = window.__ws[name];
            if (!ws || ws.readyState !== WebSocket.OPEN) return resolve('not open');
            const t = setTimeout(() => resolve('no echo within ' + ms + ' ms'), ms);
            ws.onmessage = (e) => {
                clearTimeout(t);
                resolve(String(e.data));
            };
            ws.send(text);
        });
    window.__waitClosed = (name, ms) =>
        new Promise((resolve) => {
            const t0 = Date.now();
            const poll = () => {
                const c = window.__closed[name];
                if (c) return resolve({ ms: Math.max(0, c.at - t0), code: c.code });
                if (Date.now() - t0 > ms) return resolve({ ms: -1 });
                setTimeout(poll, 5);
            };
            poll();
        });
};

async function revokeRounds(page, cfg, out, timeoutMs) {
    await page.goto(cfg.url, { waitUntil: 'load' });
    out.landed_url = page.url();
    await page.evaluate(PAGE_WS_HELPERS);
    out.other_open = await page.evaluate(([u, ms]) => window.__open('other', u, ms), [cfg.otherWsUrl, timeoutMs]);
    out.rounds = [];
    for (let n = 0; n < cfg.rounds; n++) {
        const r = { n: n };
        const url = 'wss://' + cfg.previewHost + '/ws?via=round' + n;
        r.open = await page.evaluate(([u, ms]) => window.__open('mine', u, ms), [url, timeoutMs]);
        r.echo_before = await page.evaluate(([t, ms]) => window.__echo('mine', t, ms), ['before ' + n, timeoutMs]);
        r.other_before = await page.evaluate(([t, ms]) => window.__echo('other', t, ms), ['other before ' + n, timeoutMs]);
        say({ ready: n, open: r.open, echo: r.echo_before, other: r.other_before });
        if ((await nextLine(60000)) !== 'check') throw new Error('expected check');
        // the change is in Redis but not published: the tunnel must still work
        r.echo_unpublished = await page.evaluate(([t, ms]) => window.__echo('mine', t, ms), ['unpublished ' + n, timeoutMs]);
        say({ checked: n, echo: r.echo_unpublished });
        if ((await nextLine(60000)) !== 'go') throw new Error('expected go');
        r.closed = await page.evaluate(([ms]) => window.__waitClosed('mine', ms), [cfg.waitMs]);
        r.other_after = await page.evaluate(([t, ms]) => window.__echo('other', t, ms), ['other after ' + n, timeoutMs]);
        out.rounds.push(r);
        say({ round: n, result: r });
        if ((await nextLine(60000)) !== 'next') throw new Error('expected next');
    }
}

async function queryFromOtherOrigin(page, cfg, out, timeoutMs) {
    await page.goto(cfg.parentUrl, { waitUntil: 'load' });
    out.parent_url = page.url();
    out.fetch = await page.evaluate(async (u) => {
        try {
            const r = await fetch(u);
            return { status: r.status, body: await r.text() };
        } catch (e) {
            return { status: 0, error: String(e) };
        }
    }, cfg.fetchUrl);
    out.eventsource = await page.evaluate(
        ([u, ms]) =>
            new Promise((resolve) => {
                const es = new EventSource(u);
                const t = setTimeout(() => {
                    es.close();
                    resolve({ error: 'no event within ' + ms + ' ms' });
                }, ms);
                es.onmessage = (e) => {
                    clearTimeout(t);
                    es.close();
                    resolve({ data: String(e.data) });
                };
            }),
        [cfg.eventsUrl, timeoutMs],
    );
}

async function warningThenApp(page, cfg, out, timeoutMs) {
    await page.goto(cfg.parentUrl, { waitUntil: 'load' });
    out.prefetch = await page.evaluate(async (u) => {
        try {
            const r = await fetch(u);
            return { status: r.status, body: await r.text() };
        } catch (e) {
            return { status: 0, error: String(e) };
        }
    }, cfg.fetchUrl);
    await page.goto(cfg.url, { waitUntil: 'load' });
    out.warning_url = page.url();
    out.warning_title = await page.title();
    out.warning_text = await bodyText(page);
    out.warning_lang = await page.evaluate(() => document.documentElement.lang);
    out.warning_scripts = await page.evaluate(() => document.scripts.length);
    const button = await page.$('form button[type=submit]');
    out.button_text = button ? await button.textContent() : null;
    if (!button) return;
    await page.focus('form button[type=submit]');
    await Promise.all([page.waitForNavigation({ waitUntil: 'load', timeout: timeoutMs }), page.keyboard.press('Enter')]);
    await exercise(page, out, timeoutMs);
}

async function attack(page, cfg, out, timeoutMs) {
    const onPreview = (u) => u.hostname === cfg.previewHost;
    await page.goto(cfg.parentUrl, { waitUntil: 'load' });
    if (cfg.clickInFrame) {
        const frame = await findFrame(page, cfg.previewHost, timeoutMs);
        await frame.waitForSelector('#go', { timeout: timeoutMs });
        out.frame_title = await frame.title();
        out.frame_cookie = await frame.evaluate(() => document.cookie);
        await Promise.all([page.waitForURL(onPreview, { timeout: timeoutMs }), frame.click('#go')]);
    } else {
        await page.waitForURL(onPreview, { timeout: timeoutMs });
    }
    await page.waitForLoadState('load');
    out.landed_url = page.url();
    out.landed_title = await page.title();
    out.landed_text = await bodyText(page);
    await page.goto(cfg.url, { waitUntil: 'load' });
    out.revisit_url = page.url();
    out.revisit_title = await page.title();
    out.revisit_text = await bodyText(page);
}

async function planted(page, context, cfg, out, timeoutMs) {
    await page.goto(cfg.url, { waitUntil: 'load' });
    out.first_text = await bodyText(page);
    await context.addCookies(cfg.plant);
    out.planted = (await context.cookies()).filter((c) => cfg.plant.some((p) => p.name === c.name)).map((c) => c.name);
    await page.goto(cfg.url, { waitUntil: 'load' });
    out.with_planted_title = await page.title();
    out.with_planted_text = await bodyText(page);
    const button = await page.$('form button[type=submit]');
    if (!button) return;
    await page.focus('form button[type=submit]');
    await Promise.all([page.waitForNavigation({ waitUntil: 'load', timeout: timeoutMs }), page.keyboard.press('Enter')]);
    out.landed_url = page.url();
    out.landed_title = await page.title();
    await page.goto(cfg.url, { waitUntil: 'load' });
    out.revisit_title = await page.title();
    out.revisit_text = await bodyText(page);
}

async function loadEach(page, cfg, out, timeoutMs) {
    out.loads = [];
    for (const u of cfg.urls) {
        const r = { url: u };
        try {
            const resp = await page.goto(u, { waitUntil: 'load', timeout: timeoutMs });
            r.status = resp ? resp.status() : null;
            r.landed_url = page.url();
            r.title = await page.title();
            r.text = await bodyText(page);
        } catch (e) {
            r.error = String(e && e.message ? e.message : e);
        }
        out.loads.push(r);
    }
}

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
        // "load" trusts a CA through the NSS database under $HOME (cfg.browserEnv): no certificate error is ignored
        const trustCa = cfg.scenario === 'load';
        const args = [
            '--no-sandbox',
            '--disable-gpu',
            '--disable-quic',
            '--no-first-run',
            '--disable-background-networking',
            '--disable-component-update',
            '--disable-sync',
            '--no-proxy-server',
        ];
        if (!trustCa) args.push('--ignore-certificate-errors');
        if (cfg.resolverRules) args.push('--host-resolver-rules=' + cfg.resolverRules);
        context = await chromium.launchPersistentContext(cfg.userDataDir, {
            executablePath: cfg.executablePath,
            headless: true,
            ignoreHTTPSErrors: !trustCa,
            timeout: 60000,
            env: Object.assign({}, process.env, cfg.browserEnv || {}),
            args: args,
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
        } else if (cfg.scenario === 'warning') {
            await warningThenApp(page, cfg, out, timeoutMs);
        } else if (cfg.scenario === 'query') {
            await queryFromOtherOrigin(page, cfg, out, timeoutMs);
        } else if (cfg.scenario === 'revoke') {
            await revokeRounds(page, cfg, out, timeoutMs);
        } else if (cfg.scenario === 'attack') {
            await attack(page, cfg, out, timeoutMs);
        } else if (cfg.scenario === 'load') {
            await loadEach(page, cfg, out, timeoutMs);
        } else if (cfg.scenario === 'planted') {
            await planted(page, context, cfg, out, timeoutMs);
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
