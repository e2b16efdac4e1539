// The usage sink the gateway exports its records to, as its own process: it
// takes the batches of docs/metering.md (`{"items":[{key, record}…]}`) and
// dedupes on the keys like a billing sink, keeping only the keys, so a long
// run does not grow it by the records. test/gateway/outbox/sink-server.ts
// keeps every body and header for the tests' assertions, which is more than
// a benchmark can afford. Started by run.ts; reports `{ url }` over IPC;
// answers GET /count with the number of distinct records, so the run can
// say how many it received.
import { serveChild } from "../support/child-server.js";

const seen = new Set<string>();

serveChild((req, res) => {
  if (req.method === "GET" && req.url === "/count") {
    res.writeHead(200, { "content-type": "application/json" }).end(`{"count":${seen.size}}`);
    return;
  }
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.once("end", () => {
    let items: { key?: unknown }[];
    try {
      items = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { items: typeof items }).items;
      if (!Array.isArray(items)) throw new Error("no items");
    } catch {
      res.writeHead(400).end("body is not a batch of items");
      return;
    }
    for (const item of items) if (typeof item.key === "string") seen.add(item.key);
    res.writeHead(200).end();
  });
});
