// The streaming floor: the least a Node reverse proxy does to relay a stream,
// on the gateway's stack (node:http in, undici's pooled keep-alive
// connections out), and nothing else: no auth, validation, limits, metering,
// storing, logs or metrics. Each chunk of the runtime's answer is written
// on as it arrives. Pinned where the gateway is pinned, its first token
// minus the direct one is what the two extra loopback hops and one Node
// process in the path cost, the part of the gateway's added time that no
// change to the gateway can remove. Reports `{ url }` over IPC and exits
// when the parent goes.
import {
  forwardRequest,
  RUNTIME_KEEP_ALIVE_MS,
  serveChild,
  upstreamPool,
} from "../support/child-server.js";

const upstream = upstreamPool(process.argv[2]!);

serveChild(
  (req, res) =>
    forwardRequest(upstream, req, res, (answer) => {
      res.writeHead(answer.statusCode, {
        "content-type": String(answer.headers["content-type"] ?? "text/event-stream"),
      });
      answer.body.on("data", (chunk: Buffer) => res.write(chunk));
      answer.body.once("end", () => res.end());
      answer.body.once("error", () => res.destroy());
    }),
  { keepAliveTimeoutMs: RUNTIME_KEEP_ALIVE_MS },
);
