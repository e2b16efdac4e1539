import { describe, expect, it } from "vitest";
import {
  SinkError,
  classifySinkStatus,
  createHttpSinkSender,
  isRetryableSinkError,
} from "../../../gateway/metering/http-sink.js";
import { startCountingSink } from "../outbox/sink-server.js";
import { freePort } from "../../support/free-port.js";
import { onCleanup } from "../outbox/support.js";

const signal = new AbortController().signal;

describe("usage sink sender", () => {
  it("classifies statuses: 2xx and 409 delivered, 5xx/408/429 retry, other 4xx reject", () => {
    expect([200, 201, 204, 409].map(classifySinkStatus)).toEqual(Array(4).fill("delivered"));
    expect([500, 502, 503, 504, 408, 425, 429].map(classifySinkStatus)).toEqual(
      Array(7).fill("retry"),
    );
    expect([400, 401, 403, 404, 413, 422].map(classifySinkStatus)).toEqual(Array(6).fill("reject"));
  });

  it("posts JSON with Idempotency-Key, treats a duplicate (409) as delivered", async () => {
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const send = createHttpSinkSender<{ a: number }>({ url: sink.url });
    await send({ a: 1 }, "key-1", { signal });
    await send({ a: 1 }, "key-1", { signal });
    expect(sink.attempts).toEqual(["key-1", "key-1"]);
    expect(sink.counted.get("key-1")).toEqual({ a: 1 });
    expect(sink.headers[0]!.authorization).toBeUndefined();
  });

  it("throws a retryable SinkError on 503 and a final one on 400", async () => {
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const send = createHttpSinkSender<object>({ url: sink.url, token: "t" });
    sink.failNext(1, 503);
    const unavailable = await send({}, "k", { signal }).catch((e: unknown) => e);
    expect(unavailable).toBeInstanceOf(SinkError);
    expect(isRetryableSinkError(unavailable)).toBe(true);
    expect((unavailable as SinkError).status).toBe(503);

    sink.rejectKey("bad", 400);
    const rejected = await send({}, "bad", { signal }).catch((e: unknown) => e);
    expect(isRetryableSinkError(rejected)).toBe(false);
    expect((rejected as Error).message).toContain("400");
  });

  it("treats a refused connection and a timeout as retryable", async () => {
    const port = await freePort();
    const refused = await createHttpSinkSender<object>({ url: `http://127.0.0.1:${port}/` })(
      {},
      "k",
      { signal },
    ).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Error);
    expect(isRetryableSinkError(refused)).toBe(true);

    const { createServer } = await import("node:http");
    const silent = createServer(() => {}); // never answers
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    onCleanup(
      () =>
        new Promise((resolve) => {
          silent.closeAllConnections();
          silent.close(resolve);
        }),
    );
    const address = silent.address() as { port: number };
    const started = Date.now();
    const timedOut = await createHttpSinkSender<object>({
      url: `http://127.0.0.1:${address.port}/`,
      timeoutMs: 200,
    })({}, "k", { signal }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(isRetryableSinkError(timedOut)).toBe(true);
  });
});
