// A stand-in for a runtime that answers at once, so that what the gateway
// adds is not hidden behind model time: a plain node:http server that reads
// the whole request body and answers POST /v1/responses with a fixed small
// JSON body and the usage headers a real runtime sends (the gateway refuses
// an answer without them). The body is shaped like tiny-nli's answer to one
// label. Started by run.ts through child-process.ts; reports `{ url }` over
// IPC and exits when the parent goes.
import { RUNTIME_KEEP_ALIVE_MS, serveChild } from "../support/child-server.js";

const BODY = Buffer.from(JSON.stringify({ weather: 0.0024726231566347743 }));
const HEADERS = {
  "content-type": "application/json; charset=utf-8",
  "content-length": String(BODY.length),
  "x-modelgate-input-tokens": "9",
  "x-modelgate-output-tokens": "0",
};

serveChild(
  (req, res) => {
    // Drain the body first, as a runtime must before it can answer.
    req.resume();
    req.once("end", () => {
      if (req.method === "POST" && req.url === "/v1/responses")
        res.writeHead(200, HEADERS).end(BODY);
      else res.writeHead(404).end();
    });
  },
  { keepAliveTimeoutMs: RUNTIME_KEEP_ALIVE_MS },
);
