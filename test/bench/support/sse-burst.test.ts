import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startSseBurst, type SseBurst } from "./sse-burst.js";

/**
 * The streaming benchmark's C clients against real HTTP servers on loopback:
 * what they time, how they read a response to its end, and that they reuse
 * and replace keep-alive connections as a client must.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const DELTA = 'event: response.output_text.delta\ndata: {"delta":"hi"}\n\n';

let bursts: SseBurst;
let server: Server | null = null;

beforeAll(async () => {
  bursts = await startSseBurst();
});
afterAll(async () => {
  await bursts.stop();
});
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = null;
});

const closeIdle = () => server?.closeIdleConnections();

async function serve(
  handler: (request: IncomingMessage, response: ServerResponse) => void | Promise<void>,
): Promise<{ origin: string; requests: IncomingMessage[]; sockets: () => number }> {
  const requests: IncomingMessage[] = [];
  let sockets = 0;
  server = createServer((request, response) => {
    requests.push(request);
    void handler(request, response);
  });
  server.on("connection", () => sockets++);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, requests, sockets: () => sockets };
}

/** Answers a text/event-stream in chunks, `delayMs` before the chunk holding the delta. */
const stream =
  (chunks: string[], delayMs = 0, trailers?: Record<string, string>) =>
  async (request: IncomingMessage, response: ServerResponse) => {
    for await (const _ of request); // the body, read whole
    response.writeHead(200, {
      "content-type": "text/event-stream",
      ...(trailers ? { trailer: Object.keys(trailers).join(", ") } : {}),
    });
    response.write("event: response.created\ndata: {}\n\n");
    await sleep(delayMs);
    for (const chunk of chunks) response.write(chunk);
    if (trailers) response.addTrailers(trailers);
    response.end();
  };

describe("sse-burst", () => {
  it("times each stream from its write to the first read holding a delta", async () => {
    const { origin, requests } = await serve(stream([DELTA, "event: response.completed\n\n"], 40));
    const firsts = await bursts.burst(origin, { "x-api-key": "k" }, '{"a":1}', 4);
    expect(firsts).toHaveLength(4);
    for (const ms of firsts) {
      expect(ms).toBeGreaterThanOrEqual(39);
      expect(ms).toBeLessThan(1_000);
    }
    // The request went out as given, once per connection.
    expect(requests).toHaveLength(4);
    expect(requests[0]!.method).toBe("POST");
    expect(requests[0]!.url).toBe("/v1/responses");
    expect(requests[0]!.headers["x-api-key"]).toBe("k");
    expect(requests[0]!.headers["content-type"]).toBe("application/json");
  });

  it("finds a delta split over two chunks, and reads trailers to the response's end", async () => {
    const { origin } = await serve(
      stream(
        ["event: response.output_te", "xt.delta\ndata: {}\n\n", "event: response.completed\n\n"],
        0,
        { "pay-usage": 'slug="x", input_tokens=1, output_tokens=1' },
      ),
    );
    const first = await bursts.burst(origin, {}, "{}", 1);
    expect(first).toHaveLength(1);
    // Read to its end: the same connection serves the next burst.
    const again = await bursts.burst(origin, {}, "{}", 1);
    expect(again[0]).toBeGreaterThan(0);
  });

  it("keeps its connections from one burst to the next", async () => {
    const server = await serve(stream([DELTA]));
    await bursts.burst(server.origin, {}, "{}", 3);
    await bursts.burst(server.origin, {}, "{}", 3);
    expect(server.requests).toHaveLength(6);
    expect(server.sockets()).toBe(3);
  });

  it("replaces a kept connection the server has closed", async () => {
    const server = await serve(stream([DELTA]));
    await bursts.burst(server.origin, {}, "{}", 2);
    closeIdle();
    await sleep(50); // the FINs reach the client's side
    const firsts = await bursts.burst(server.origin, {}, "{}", 2);
    expect(firsts).toHaveLength(2);
    expect(server.sockets()).toBe(4);
  });

  it("sends a request again once on a new connection when a kept one closes unanswered", async () => {
    const answer = stream([DELTA]);
    const server = await serve((request, response) => {
      // The second request, the first on a kept connection: closed as it arrives.
      if (server.requests.length === 2) request.socket.destroy();
      else void answer(request, response);
    });
    await bursts.burst(server.origin, {}, "{}", 1);
    const firsts = await bursts.burst(server.origin, {}, "{}", 1);
    expect(firsts).toHaveLength(1);
    expect(server.requests).toHaveLength(3);
    expect(server.sockets()).toBe(2);
  });

  it("fails a burst that is answered with another status, or with no delta", async () => {
    const refused = await serve((_request, response) => {
      response.writeHead(500, { "content-type": "application/json" }).end('{"error":{}}');
    });
    await expect(bursts.burst(refused.origin, {}, "{}", 2)).rejects.toThrow(
      /a status other than 200/,
    );
    server?.close();
    const whole = await serve((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" }).end('{"output":[]}');
    });
    await expect(bursts.burst(whole.origin, {}, "{}", 1)).rejects.toThrow(/a stream with no delta/);
  });
});
