// The streaming floor: the least a Node reverse proxy does to relay a stream,
// on the gateway's stack (node:http in, undici's pooled keep-alive
// connections out), and nothing else: no auth, validation, limits, metering,
// storing, logs or metrics. Each chunk of the runtime's answer is written
// on as it arrives. Pinned where the gateway is pinned, its first token
// minus the direct one is what the two extra loopback hops and one Node
// process in the path cost, the part of the gateway's added time that no
// change to the gateway can remove. Reports `{ url }` over IPC and exits
// when the parent goes.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";

const upstream = new Pool(process.argv[2]!, { connections: 128, keepAliveTimeout: 30_000 });

const server = createServer((req, res) => {
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
      .then((answer) => {
        res.writeHead(answer.statusCode, {
          "content-type": String(answer.headers["content-type"] ?? "text/event-stream"),
        });
        answer.body.on("data", (chunk: Buffer) => res.write(chunk));
        answer.body.once("end", () => res.end());
        answer.body.once("error", () => res.destroy());
      })
      .catch(() => res.writeHead(502).end());
  });
});
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
