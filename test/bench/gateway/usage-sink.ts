// The usage sink the gateway exports its records to, as its own process: it
// dedupes on Idempotency-Key like a billing sink (201 the first time, 409
// after) and keeps only the keys, so a long run does not grow it by the
// records. test/gateway/outbox/sink-server.ts keeps every body and header
// for the tests' assertions, which is more than a benchmark can afford.
// Started by run.ts; reports `{ url }` over IPC; answers GET /count with the
// number of distinct records, so the run can say how many it received.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const seen = new Set<string>();

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/count") {
    res.writeHead(200, { "content-type": "application/json" }).end(`{"count":${seen.size}}`);
    return;
  }
  req.resume();
  req.once("end", () => {
    const key = req.headers["idempotency-key"];
    if (typeof key !== "string" || key.length === 0) {
      res.writeHead(400).end("no idempotency-key");
      return;
    }
    const duplicate = seen.has(key);
    seen.add(key);
    res.writeHead(duplicate ? 409 : 201).end();
  });
});

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
