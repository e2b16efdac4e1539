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

  it("posts a batch of keyed records as JSON; a key sent again is counted once", async () => {
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const send = createHttpSinkSender<{ a: number }>({ url: sink.url });
    const items = [
      { key: "key-1", record: { a: 1 } },
      { key: "key-2", record: { a: 2 } },
    ];
    await send(items, { signal });
    await send(items.slice(0, 1), { signal });
    expect(sink.batches).toEqual([["key-1", "key-2"], ["key-1"]]);
    expect(sink.counted).toEqual(
      new Map([
        ["key-1", { a: 1 }],
        ["key-2", { a: 2 }],
      ]),
    );
    expect(sink.headers[0]!["content-type"]).toBe("application/json");
    expect(sink.headers[0]!.authorization).toBeUndefined();
  });

  it("throws a retryable SinkError on 503 and a final one on 400", async () => {
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const send = createHttpSinkSender<object>({ url: sink.url, token: "t" });
    sink.failNext(1, 503);
    const unavailable = await send([{ key: "k", record: {} }], { signal }).catch((e: unknown) => e);
    expect(unavailable).toBeInstanceOf(SinkError);
    expect(isRetryableSinkError(unavailable)).toBe(true);
    expect((unavailable as SinkError).status).toBe(503);
    expect(sink.headers[0]!.authorization).toBe("Bearer t");

    sink.rejectKey("bad", 400);
    const rejected = await send([{ key: "bad", record: {} }], { signal }).catch((e: unknown) => e);
    expect(isRetryableSinkError(rejected)).toBe(false);
    expect((rejected as Error).message).toContain("400");
  });

  it("treats a refused connection and a timeout as retryable", async () => {
    const port = await freePort();
    const refused = await createHttpSinkSender<object>({ url: `http://127.0.0.1:${port}/` })(
      [{ key: "k", record: {} }],
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
    })([{ key: "k", record: {} }], { signal }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(isRetryableSinkError(timedOut)).toBe(true);
  });
});
