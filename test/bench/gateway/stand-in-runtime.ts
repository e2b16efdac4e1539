// A stand-in for a runtime that answers at once, so that what the gateway
// adds is not hidden behind model time: a plain node:http server that reads
// the whole request body and answers POST /v1/responses with a fixed small
// JSON body and the usage headers a real runtime sends (the gateway refuses
// an answer without them). The body is shaped like tiny-nli's answer to one
// label. Started by run.ts through child-process.ts; reports `{ url }` over
// IPC and exits when the parent goes.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const BODY = Buffer.from(JSON.stringify({ weather: 0.0024726231566347743 }));
const HEADERS = {
  "content-type": "application/json; charset=utf-8",
  "content-length": String(BODY.length),
  "x-modelgate-input-tokens": "9",
  "x-modelgate-output-tokens": "0",
};

const server = createServer((req, res) => {
  // Drain the body first, as a runtime must before it can answer.
  req.resume();
  req.once("end", () => {
    if (req.method === "POST" && req.url === "/v1/responses") res.writeHead(200, HEADERS).end(BODY);
    else res.writeHead(404).end();
  });
});
// The runtime's Fastify default; longer than the gateway's upstream keep-alive.
server.keepAliveTimeout = 72_000;

server.listen(0, "127.0.0.1", () => {
  const { port } = server.address() as AddressInfo;
  process.send!({ url: `http://127.0.0.1:${port}` });
});
const stop = () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
};
process.once("SIGTERM", stop);
process.once("disconnect", stop);
