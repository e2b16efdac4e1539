import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { isCodedError } from "../../../lib/coded-error.js";
import { FREE, type RoutableModel } from "../../../gateway/registry/registry.js";
import { buffer } from "node:stream/consumers";
import {
  Upstream,
  type ForwardRequest,
  type UpstreamResponse,
} from "../../../gateway/upstream/forward.js";

/** Real loopback servers standing in for runtimes, each with its own behaviour. */
const servers: Server[] = [];

async function runtime(
  handler: (req: IncomingMessage, body: string) => [number, string] | null,
): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      hits++;
      const answer = handler(req, body);
      if (!answer) {
        req.socket.destroy();
        return;
      }
      setTimeout(() => {
        res.writeHead(answer[0], {
          "content-type": "application/json",
          "x-modelgate-input-tokens": "3",
          "x-modelgate-output-tokens": "1",
        });
        res.end(answer[1]);
      }, 20);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits: () => hits };
}

async function refusedUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

function model(endpoints: string[], timeoutMs = 5_000): RoutableModel {
  return {
    id: "m",
    key: "default/m",
    task: "text-generation",
    routes: new Set(["api-key"]),
    timeoutMs,
    maxTokens: undefined,
    overflow: "truncate",
    serviceSlug: "m",
    prices: FREE,
    endpoints,
    created: 0,
  };
}

const body = Buffer.from('{"model":"m","input":"x"}');
const headers = { "content-type": "application/json" };
let upstream: Upstream;

afterEach(async () => {
  await upstream?.close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

/**
 * Both ways to a runtime keep the same rules: whole answers (undici) and
 * streams (node:http, stream-request.ts), the latter read whole here.
 */
const exchanges = {
  forward: (u: Upstream, req: ForwardRequest) => u.forward(req),
  stream: (u: Upstream, req: ForwardRequest): Promise<UpstreamResponse> =>
    u.stream(req, async (answer, endpoint) => ({
      status: answer.statusCode,
      headers: answer.headers,
      body: await buffer(answer.body),
      endpoint,
    })),
};

describe.each(["forward", "stream"] as const)("Upstream.%s", (way) => {
  const send = (req: ForwardRequest) => exchanges[way](upstream, req);

  it("sends to the endpoint with the fewest requests in flight", async () => {
    upstream = new Upstream();
    const a = await runtime(() => [200, "{}"]);
    const b = await runtime(() => [200, "{}"]);
    await Promise.all(
      Array.from({ length: 10 }, () => send({ model: model([a.url, b.url]), body, headers })),
    );
    expect(a.hits()).toBe(5);
    expect(b.hits()).toBe(5);
  });

  it("sends a continuation to its preferred endpoint until that one is overloaded", async () => {
    upstream = new Upstream({ preferredLoadMargin: 2 });
    const a = await runtime(() => [200, "{}"]);
    const b = await runtime(() => [200, "{}"]);
    const continuation = () =>
      send({ model: model([a.url, b.url]), body, headers, preferredEndpoint: b.url });
    // One at a time: b is never busier than a, so it takes every one.
    for (let i = 0; i < 4; i++) expect((await continuation()).endpoint).toBe(b.url);
    expect(a.hits()).toBe(0);
    // Ten at once: b takes them while within two of a's load, a takes the rest.
    const answers = await Promise.all(Array.from({ length: 10 }, continuation));
    const onB = answers.filter((r) => r.endpoint === b.url).length;
    expect(onB).toBe(6);
    expect(a.hits()).toBe(4);
  });

  it("sends a preferred request elsewhere when its preferred endpoint is not among the ready ones", async () => {
    upstream = new Upstream();
    const a = await runtime(() => [200, "{}"]);
    const answer = await send({
      model: model([a.url]),
      body,
      headers,
      preferredEndpoint: "http://127.0.0.1:1",
    });
    expect(answer.endpoint).toBe(a.url);
  });

  it("retries another endpoint when the connection is refused: the request never reached a runtime", async () => {
    upstream = new Upstream();
    const good = await runtime((_req, received) => [200, received]);
    const answer = await send({
      model: model([await refusedUrl(), good.url]),
      body,
      headers,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe(body.toString());
    expect(answer.endpoint).toBe(good.url);
  });

  it("never retries a runtime that had the request and failed: inference may have run", async () => {
    upstream = new Upstream();
    const dropping = await runtime(() => null);
    const good = await runtime(() => [200, "{}"]);
    const failed = await send({ model: model([dropping.url, good.url]), body, headers }).catch(
      (e: unknown) => e,
    );
    // Whichever endpoint was picked first: if it was the dropping one, no second try happened.
    if (isCodedError(failed)) {
      expect(failed).toMatchObject({ code: "upstream_error", statusCode: 502 });
      expect(good.hits()).toBe(0);
    } else {
      expect(dropping.hits()).toBe(0);
    }
    expect(dropping.hits() + good.hits()).toBe(1);
  });

  it("passes a runtime's error answer through instead of retrying it", async () => {
    upstream = new Upstream();
    const busy = await runtime(() => [429, '{"error":{"code":"rate_limit_exceeded"}}']);
    const answer = await send({ model: model([busy.url]), body, headers });
    expect(answer.status).toBe(429);
    expect(busy.hits()).toBe(1);
  });

  it.each([
    [
      "every endpoint refuses",
      async () => [await refusedUrl(), await refusedUrl()],
      "upstream_unavailable",
      502,
    ],
    ["there is no ready endpoint", () => Promise.resolve([]), "model_unavailable", 503],
  ])("answers a coded error when %s", async (_name, endpoints, code, status) => {
    upstream = new Upstream();
    await expect(send({ model: model(await endpoints()), body, headers })).rejects.toMatchObject({
      code,
      statusCode: status,
    });
  });

  it("times out with 408 at the model's timeout", async () => {
    upstream = new Upstream();
    const hung = createServer(() => {});
    servers.push(hung);
    await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
    const started = Date.now();
    await expect(
      send({
        model: model([`http://127.0.0.1:${(hung.address() as AddressInfo).port}`], 300),
        body,
        headers,
      }),
    ).rejects.toMatchObject({ code: "request_timeout", statusCode: 408 });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("cancels the runtime's request when the caller's signal fires, and tries no other endpoint", async () => {
    upstream = new Upstream();
    let closed = 0;
    let hits = 0;
    const hung = createServer((req) => {
      hits++;
      req.socket.once("close", () => closed++);
    });
    servers.push(hung);
    await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
    const cancel = new EventEmitter();
    setTimeout(() => cancel.emit("abort"), 100);
    const started = Date.now();
    const outcome = await send({
      model: model([url, url], 10_000),
      body,
      headers,
      signal: cancel,
    }).catch((error: unknown) => error);
    expect((outcome as Error).name).toBe("AbortError");
    expect(Date.now() - started).toBeLessThan(2_000);
    await vi.waitFor(() => expect(closed).toBe(1));
    expect(hits).toBe(1);
  });

  it("reuses pooled keep-alive connections", async () => {
    upstream = new Upstream();
    const sockets = new Set<unknown>();
    const server = await runtime((req) => {
      sockets.add(req.socket);
      return [200, "{}"];
    });
    for (let i = 0; i < 20; i++) {
      await send({ model: model([server.url]), body, headers });
    }
    // Twenty requests one after another share a connection or two, never one each.
    expect(sockets.size).toBeLessThanOrEqual(2);
  });
});

/** A server with its own handler, for what only the stream path has. */
async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const streamed = (url: string, timeoutMs = 5_000): ForwardRequest => ({
  model: model([url], timeoutMs),
  body,
  headers,
});

const readWhole = (req: ForwardRequest) =>
  upstream.stream(req, async (answer) => (await buffer(answer.body)).toString());

describe("Upstream.stream's connections", () => {
  it("writes a request on a kept-alive connection before the event loop's check phase", async () => {
    upstream = new Upstream();
    const order: string[] = [];
    const { url } = await serve((req, res) => {
      req.resume();
      req.on("end", () => res.end("event: x\ndata: {}\n\n"));
      order.push("runtime has it");
    });
    await readWhole(streamed(url));
    order.length = 0;
    // Sent from a check phase: written at once, the runtime reads it in the
    // next poll phase, before the next check phase. undici would write it
    // from a setImmediate of its own, in that next check phase: the runtime
    // would read it only after "check phase".
    await new Promise<string>((resolve, reject) =>
      setImmediate(() => {
        readWhole(streamed(url)).then(resolve, reject);
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
    await readWhole(streamed(url));
    // The runtime drops the idle connection; the gateway has not read the FIN yet.
    server.closeIdleConnections();
    expect(await readWhole(streamed(url))).toBe("event: x\ndata: {}\n\n");
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
      .stream(streamed(url, 300), async (answer) => {
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
    await upstream.stream(streamed(url), () => Promise.resolve("left unread"));
    await readWhole(streamed(url));
    expect(sockets.size).toBe(2);
  });
});
