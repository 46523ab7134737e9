// HTTP/1.1 request trailers through the gateway to an h2c port (tests/integration/test_h1_trailers.py), one Node process
// for both ends, so that the client can wait for what the app saw (event order, no clock):
//   - the app: an HTTP/2 server with prior knowledge (http2.createServer, as a sandbox's gRPC or HTTP/2 app); each request
//     is answered, at its end, with the JSON {headers, body, trailers, events} of what it got;
//   - the client: https.request with Transfer-Encoding: chunked and req.addTrailers(), over TLS to the gateway.
// Prints "listening <port>"; then reads one JSON line on stdin {host, port, token, ca, cases: [...]} and prints one JSON
// line per case, {name, status, got (the app's JSON), firstBeforeRest}, then "done".
"use strict";
const http2 = require("http2");
const https = require("https");
const fs = require("fs");
const readline = require("readline");

const seen = {}; // path -> {events, firstData: promise resolved at the app's first DATA}

function track(path) {
  if (!seen[path]) {
    let resolve;
    const firstData = new Promise((r) => (resolve = r));
    seen[path] = { events: [], firstData, gotFirst: resolve };
  }
  return seen[path];
}

const app = http2.createServer((req, res) => {
  const t = track(req.url);
  const chunks = [];
  t.events.push("head");
  req.on("data", (d) => {
    chunks.push(d);
    t.events.push("data");
    t.gotFirst();
  });
  req.on("end", () => {
    t.events.push("end");
    const headers = Object.assign({}, req.headers);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ headers, body: Buffer.concat(chunks).toString(), trailers: req.trailers, events: t.events }));
  });
});
app.listen(0, "127.0.0.1", () => console.log("listening " + app.address().port));

// One case: {name, path, parts: [strings], trailers: {...}, streamed: bool, host and token (optional: gw's)}. Streamed: the first part is written, the rest
// only once the app has had a DATA frame of it; otherwise every part, the trailers and the end go in one go.
function run(gw, c) {
  return new Promise((resolve) => {
    const t = track(c.path);
    let restSent = false;
    let firstBeforeRest = null;
    const req = https.request({
      host: "127.0.0.1", port: gw.port, servername: c.host || gw.host, ca: gw.ca, method: "POST", path: c.path,
      headers: { host: c.host || gw.host, "x-lizard-access-token": c.token || gw.token, "transfer-encoding": "chunked",
                 "content-type": "text/plain", te: "trailers" },
    }, (res) => {
      const body = [];
      res.on("data", (d) => body.push(d));
      res.on("end", () => {
        let got = null;
        try { got = JSON.parse(Buffer.concat(body).toString()); } catch (e) { got = Buffer.concat(body).toString(); }
        resolve({ name: c.name, status: res.statusCode, got, firstBeforeRest });
      });
    });
    req.on("error", (e) => resolve({ name: c.name, status: 0, got: String(e), firstBeforeRest }));
    const rest = () => {
      restSent = true;
      for (const p of c.parts.slice(1)) req.write(p);
      req.addTrailers(c.trailers);
      req.end();
    };
    req.write(c.parts[0]);
    if (c.streamed) {
      t.firstData.then(() => {
        firstBeforeRest = !restSent;
        rest();
      });
    } else {
      rest();
    }
  });
}

const rl = readline.createInterface({ input: process.stdin });
rl.once("line", async (line) => {
  const gw = JSON.parse(line);
  gw.ca = fs.readFileSync(gw.ca);
  for (const c of gw.cases) console.log(JSON.stringify(await run(gw, c)));
  console.log("done");
});
