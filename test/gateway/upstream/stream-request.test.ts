import { createServer, type IncomingMessage, type ServerResponse, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { buffer } from "node:stream/consumers";
import { afterEach, describe, expect, it } from "vitest";
import { FREE, type RoutableModel } from "../../../gateway/registry/registry.js";
import { Upstream, type ForwardRequest } from "../../../gateway/upstream/forward.js";

/** What only the stream path has: its own connections (stream-request.ts). */
const servers: Server[] = [];
let upstream: Upstream;

async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function request(url: string, timeoutMs = 5_000): ForwardRequest {
  const model: RoutableModel = {
    id: "m",
    key: "default/m",
    task: "text-generation",
    routes: new Set(["api-key"]),
    timeoutMs,
    maxTokens: undefined,
    serviceSlug: "m",
    prices: FREE,
    endpoints: [url],
  };
  return {
    model,
    body: Buffer.from('{"model":"m","input":"x","stream":true}'),
    headers: { "content-type": "application/json" },
  };
}

const readWhole = (req: ForwardRequest) =>
  upstream.stream(req, async (answer) => (await buffer(answer.body)).toString());

afterEach(async () => {
  await upstream?.close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

describe("Upstream.stream's connections", () => {
  it("writes a request on a kept-alive connection before the event loop's check phase", async () => {
    upstream = new Upstream();
    const order: string[] = [];
    const { url } = await serve((req, res) => {
      req.resume();
      req.on("end", () => res.end("event: x\ndata: {}\n\n"));
      order.push("runtime has it");
    });
    await readWhole(request(url));
    order.length = 0;
    // Sent from a check phase: written at once, the runtime reads it in the
    // next poll phase, before the next check phase. undici would write it
    // from a setImmediate of its own, in that next check phase: the runtime
    // would read it only after "check phase".
    await new Promise<string>((resolve, reject) =>
      setImmediate(() => {
        readWhole(request(url)).then(resolve, reject);
        setImmediate(() => order.push("check phase"));
      }),
    );
    expect(order).toEqual(["runtime has it", "check phase"]);
  });

  it("sends again, once, a request whose kept-alive connection the runtime had just closed", async () => {
    upstream = new Upstream();
    let seen = 0;
    const { server, url } = await serve((req, res) => {
      seen++;
      req.resume();
      req.on("end", () => res.end("event: x\ndata: {}\n\n"));
    });
    await readWhole(request(url));
    // The runtime drops the idle connection; the gateway has not read the FIN yet.
    server.closeIdleConnections();
    expect(await readWhole(request(url))).toBe("event: x\ndata: {}\n\n");
    expect(seen).toBe(2);
  });

  it("ends a body that stalls past the model's timeout with an error its reader sees", async () => {
    upstream = new Upstream();
    const { url } = await serve((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("event: first\ndata: {}\n\n");
      // and nothing more
    });
    const started = Date.now();
    const outcome = await upstream
      .stream(request(url, 300), async (answer) => {
        const pieces: string[] = [];
        for await (const chunk of answer.body as AsyncIterable<Buffer>) pieces.push(String(chunk));
        return pieces;
      })
      .catch((error: unknown) => error);
    expect(outcome).toMatchObject({ code: "UPSTREAM_BODY_TIMEOUT" });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("destroys a body its reader left unread, so that its connection is never reused", async () => {
    upstream = new Upstream();
    const sockets = new Set<unknown>();
    const { url } = await serve((req, res) => {
      sockets.add(req.socket);
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("event: first\ndata: {}\n\n");
      setTimeout(() => res.end("event: last\ndata: {}\n\n"), 50);
    });
    await upstream.stream(request(url), () => Promise.resolve("left unread"));
    await readWhole(request(url));
    expect(sockets.size).toBe(2);
  });
});
