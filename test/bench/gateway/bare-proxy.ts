// The floor row's proxy: the least a Node reverse proxy does per request,
// on the same stack as the gateway (node:http in, undici's pooled keep-alive
// connections out), and nothing else: no auth, validation, limits, metering,
// logs or metrics. Pinned like the gateway, it shows how much of the gap to
// direct any Node proxy on one core costs (test/bench/gateway/README.md).
// Reports `{ url }` over IPC and exits when the parent goes.
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
      .then(async (answer) => {
        const body = Buffer.from(await answer.body.arrayBuffer());
        res.writeHead(answer.statusCode, { "content-type": "application/json" }).end(body);
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
