// The floor row's proxy: the least a Node reverse proxy does per request,
// on the same stack as the gateway (node:http in, undici's pooled keep-alive
// connections out), and nothing else: no auth, validation, limits, metering,
// logs or metrics. Pinned like the gateway, it shows how much of the gap to
// direct any Node proxy on one core costs (test/bench/gateway/README.md).
// Reports `{ url }` over IPC and exits when the parent goes.
import {
  forwardRequest,
  RUNTIME_KEEP_ALIVE_MS,
  serveChild,
  upstreamPool,
} from "../support/child-server.js";

const upstream = upstreamPool(process.argv[2]!);

serveChild(
  (req, res) =>
    forwardRequest(upstream, req, res, async (answer) => {
      const body = Buffer.from(await answer.body.arrayBuffer());
      res.writeHead(answer.statusCode, { "content-type": "application/json" }).end(body);
    }),
  { keepAliveTimeoutMs: RUNTIME_KEEP_ALIVE_MS },
);
