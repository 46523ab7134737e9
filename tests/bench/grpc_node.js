// The second gRPC server of tests/bench/run's section "grpc": Node's http2
// module over h2c, speaking gRPC's wire format itself (no gRPC library): a
// faster server than python3-grpcio, so that the proxy rather than the
// server is what limits the calls. /lizard.bench.B/Echo answers the request's
// message (a unary call: one length-prefixed message, then grpc-status 0 in
// the trailers); /lizard.bench.B/Calls answers how many Echo calls it served.
// Usage: node grpc_node.js PORT READY_FILE
"use strict";
const fs = require("fs");
const http2 = require("http2");

const [port, ready] = process.argv.slice(2);
let calls = 0;

function frame(payload) {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

const server = http2.createServer({ settings: { maxConcurrentStreams: 1000 } });
server.on("stream", (stream, headers) => {
  const chunks = [];
  stream.on("data", (c) => chunks.push(c));
  stream.on("end", () => {
    // a stream the client (or a proxy whose client left) reset while its body arrived takes no answer
    if (stream.destroyed || stream.closed) return;
    const body = Buffer.concat(chunks);
    let answer;
    if (headers[":path"] === "/lizard.bench.B/Echo" && body.length >= 5) {
      calls++;
      answer = body.subarray(5, 5 + body.readUInt32BE(1));
    } else if (headers[":path"] === "/lizard.bench.B/Calls") {
      answer = Buffer.from(String(calls));
    } else {
      stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "12" }, { endStream: true });
      return;
    }
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(frame(answer));
  });
  stream.on("error", () => {});
});
// an answer racing a reset must not end the server: log it and go on
process.on("uncaughtException", (e) => console.error("grpc_node: " + e.message));
server.on("sessionError", () => {});
server.listen(Number(port), "127.0.0.1", () => {
  fs.writeFileSync(ready + ".tmp", "listening\n");
  fs.renameSync(ready + ".tmp", ready);
});
