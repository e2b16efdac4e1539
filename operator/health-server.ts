import { createServer, type Server } from "node:http";
import type { Registry } from "prom-client";

/**
 * /healthz (the process answers), /readyz (its caches have synced, as
 * controller-runtime's readiness check means it; a standby replica is ready
 * too, it only does not act) and /metrics, on one port. Plain node:http: three
 * fixed paths need no framework.
 */
export interface HealthServerOptions {
  host: string;
  port: number;
  registry: Registry;
  ready: () => boolean;
}

export async function startHealthServer(options: HealthServerOptions): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET") {
      res.writeHead(405, { allow: "GET" }).end();
      return;
    }
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    } else if (path === "/readyz") {
      const ready = options.ready();
      res
        .writeHead(ready ? 200 : 503, { "content-type": "text/plain" })
        .end(ready ? "ok" : "caches not synced");
    } else if (path === "/metrics") {
      options.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": options.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return server;
}
