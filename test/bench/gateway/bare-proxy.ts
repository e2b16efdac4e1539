// The floor rows' proxy: the least a Node reverse proxy does per request, on
// the same stack as the gateway (node:http in, undici's pooled keep-alive
// connections out), and nothing else: no auth, validation, limits, metering,
// storing, logs or metrics. Pinned where the gateway is pinned, what it adds
// to direct is what the two extra loopback hops and one Node process in the
// path cost, the part of the gateway's added time that no change to the
// gateway can remove (test/bench/gateway/README.md, docs/streaming.md).
//
// Usage: bare-proxy.ts <runtime url> [whole|chunks]. `whole` (bench:gateway)
// reads the answer and sends it in one write; `chunks` (bench:streaming)
// writes each chunk of the runtime's answer on as it arrives. Reports
// `{ url }` over IPC and exits when the parent goes.
import { Pool } from "undici";
import { RUNTIME_KEEP_ALIVE_MS, serveChild } from "../support/child-server.js";

const upstream = new Pool(process.argv[2]!, { connections: 128, keepAliveTimeout: 30_000 });
const relayChunks = process.argv[3] === "chunks";

serveChild(
  (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.once("end", () => {
      upstream
        .request({
          path: req.url!,
          method: "POST",
          headers: { "content-type": req.headers["content-type"] ?? "application/json" },
          body: Buffer.concat(chunks),
        })
        .then(async (answer) => {
          const contentType = String(answer.headers["content-type"] ?? "application/json");
          if (!relayChunks) {
            const body = Buffer.from(await answer.body.arrayBuffer());
            res.writeHead(answer.statusCode, { "content-type": contentType }).end(body);
            return;
          }
          res.writeHead(answer.statusCode, { "content-type": contentType });
          answer.body.on("data", (chunk: Buffer) => res.write(chunk));
          answer.body.once("end", () => res.end());
          answer.body.once("error", () => res.destroy());
        })
        .catch(() => res.writeHead(502).end());
    });
  },
  { keepAliveTimeoutMs: RUNTIME_KEEP_ALIVE_MS },
);
