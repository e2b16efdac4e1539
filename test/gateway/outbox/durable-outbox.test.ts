import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import {
  DurableOutbox,
  type DurableOutboxOptions,
} from "../../../gateway/outbox/durable-outbox.js";
import { outboxMetrics } from "../../../gateway/outbox/outbox-metrics.js";
import { createHttpSinkSender, isRetryableSinkError } from "../../../gateway/metering/http-sink.js";
import { startCountingSink, type CountingSink } from "./sink-server.js";
import { freePort } from "../../support/free-port.js";
import { fastRetry, logs, onCleanup, outboxDir } from "./support.js";

interface Rec {
  n: number;
}

function outboxFor(
  dir: string,
  sinkUrl: string,
  extra: Partial<DurableOutboxOptions<Rec>> = {},
): DurableOutbox<Rec> {
  const outbox = new DurableOutbox<Rec>({
    dir,
    name: "usage",
    sendBatch: createHttpSinkSender<Rec>({ url: sinkUrl, timeoutMs: 2_000 }),
    isRetryable: isRetryableSinkError,
    retry: fastRetry,
    logger: logs().logger,
    ...extra,
  });
  onCleanup(() => outbox.close());
  return outbox;
}

async function sink(port?: number): Promise<CountingSink> {
  const s = await startCountingSink(port);
  onCleanup(() => s.close());
  return s;
}

const keys = (n: number, prefix = "req"): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}_${i}`);

describe("DurableOutbox", () => {
  it("has the record on disk when append resolves", async () => {
    const dir = await outboxDir();
    const outbox = outboxFor(dir, "http://127.0.0.1:9/unused");
    await outbox.append("req_1", { n: 1 });
    const journal = await readFile(join(dir, "usage.records.jsonl"), "utf8");
    expect(journal).toMatch(/^\{"key":"req_1","at":\d+,"record":\{"n":1\}\}\n$/);
    expect(outbox.pending()).toBe(1);
  });

  it("delivers every record once, with its key as Idempotency-Key, and empties the journals", async () => {
    const s = await sink();
    const dir = await outboxDir();
    // Idle compaction waits for this many acks (default 100, to spare fsyncs).
    const outbox = outboxFor(dir, s.url, { compactWhenIdleAfter: 25 });
    await outbox.start();
    await Promise.all(keys(25).map((key, n) => outbox.append(key, { n })));
    await outbox.whenIdle();
    expect([...s.counted.keys()].sort()).toEqual(keys(25).sort());
    expect(s.counted.get("req_7")).toEqual({ n: 7 });
    expect(s.attempts).toHaveLength(25);
    await outbox.close();
    expect(await readFile(join(dir, "usage.records.jsonl"), "utf8")).toBe("");
    expect(await readFile(join(dir, "usage.acks.jsonl"), "utf8")).toBe("");
  });

  it("does not compact after every request that drains the queue: compaction costs fsyncs", async () => {
    const s = await sink();
    const dir = await outboxDir();
    const outbox = outboxFor(dir, s.url);
    await outbox.start();
    for (const key of keys(3)) {
      await outbox.append(key, { n: 0 });
      await outbox.whenIdle();
    }
    expect(
      (await readFile(join(dir, "usage.records.jsonl"), "utf8")).trim().split("\n"),
    ).toHaveLength(3);
    await outbox.close();
  });

  it("records survive a crash and are delivered by the next process, each counted once", async () => {
    const s = await sink();
    const dir = await outboxDir();
    // First "process": journals records, then dies before delivering (no close).
    const crashed = new DurableOutbox<Rec>({
      dir,
      name: "usage",
      send: () => Promise.reject(new Error("never reached")),
      retry: fastRetry,
      logger: logs().logger,
    });
    await crashed.open();
    for (const [n, key] of keys(20).entries()) await crashed.append(key, { n });

    const restarted = outboxFor(dir, s.url);
    await restarted.start();
    expect(restarted.pending()).toBe(20);
    await restarted.whenIdle();
    expect(s.counted.size).toBe(20);
    expect(s.attempts).toHaveLength(20);
    await restarted.close();

    // A third start finds nothing left to send.
    const third = outboxFor(dir, s.url);
    await third.start();
    expect(third.pending()).toBe(0);
  });

  it("keeps retrying through 503s, then delivers everything exactly once", async () => {
    const s = await sink();
    s.failNext(6, 503);
    const registry = new Registry();
    const outbox = outboxFor(await outboxDir(), s.url, {
      metrics: outboxMetrics(registry, "usage"),
    });
    await outbox.start();
    await Promise.all(keys(10).map((key, n) => outbox.append(key, { n })));
    await outbox.whenIdle();
    expect(s.counted.size).toBe(10);
    expect(s.attempts.length).toBeGreaterThanOrEqual(16);
    // Every attempt of a record carried that record's key: nothing new was invented.
    expect(new Set(s.attempts)).toEqual(new Set(keys(10)));
    const text = await registry.metrics();
    expect(text).toContain('modelgate_outbox_delivered_total{outbox="usage"} 10');
    expect(text).toContain(
      'modelgate_outbox_failed_attempts_total{outbox="usage",retryable="true"} 6',
    );
    expect(text).toContain('modelgate_outbox_pending_records{outbox="usage"} 0');
  });

  it("waits for a sink that is down at first", async () => {
    const port = await freePort();
    const outbox = outboxFor(await outboxDir(), `http://127.0.0.1:${port}/usage`);
    await outbox.start();
    await Promise.all(keys(5).map((key, n) => outbox.append(key, { n })));
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(outbox.pending()).toBe(5);
    const s = await sink(port);
    await outbox.whenIdle();
    expect(s.counted.size).toBe(5);
  });

  it("a down sink is probed, not stormed", async () => {
    const port = await freePort();
    let calls = 0;
    const send = createHttpSinkSender<Rec>({ url: `http://127.0.0.1:${port}/usage` });
    const outbox = outboxFor(await outboxDir(), "unused", {
      sendBatch: (items, options) => {
        calls += 1;
        return send(items, options);
      },
      retry: { baseDelayMs: 50, maxDelayMs: 50 },
      concurrency: 8,
    });
    await outbox.start();
    await Promise.all(keys(50).map((key, n) => outbox.append(key, { n })));
    await new Promise((resolve) => setTimeout(resolve, 500));
    // One probe per ~25-50 ms gate, not 50 records x retries.
    expect(calls).toBeLessThan(40);
    expect(outbox.pending()).toBe(50);
  });

  it("keeps one copy of a key appended twice", async () => {
    const s = await sink();
    const dir = await outboxDir();
    const outbox = outboxFor(dir, s.url);
    await Promise.all([outbox.append("dup", { n: 1 }), outbox.append("dup", { n: 2 })]);
    await outbox.append("dup", { n: 3 });
    expect(outbox.pending()).toBe(1);
    const lines = (await readFile(join(dir, "usage.records.jsonl"), "utf8")).trim().split("\n");
    expect(lines).toHaveLength(1);
    await outbox.start();
    await outbox.whenIdle();
    await outbox.append("dup", { n: 4 }); // delivered, not yet compacted away: still known
    expect(s.counted.get("dup")).toEqual({ n: 1 });
    expect(s.attempts.filter((k) => k === "dup").length).toBeLessThanOrEqual(2);
  });

  it("sends records in batches of at most maxBatch, each key in one of them", async () => {
    const s = await sink();
    const outbox = outboxFor(await outboxDir(), s.url, { maxBatch: 40, concurrency: 2 });
    await Promise.all(keys(150).map((key, n) => outbox.append(key, { n })));
    await outbox.start();
    await outbox.whenIdle();
    // Two sends in flight: the last two batches may reach the sink in either order.
    expect(s.batches.map((b) => b.length).sort()).toEqual([30, 40, 40, 40]);
    expect(s.attempts.sort()).toEqual(keys(150).sort());
    expect(s.counted.get("req_149")).toEqual({ n: 149 });
  });

  it("lets records that arrive one by one linger, so they share a send", async () => {
    const s = await sink();
    const outbox = outboxFor(await outboxDir(), s.url, { lingerMs: 300 });
    await outbox.start();
    for (const [n, key] of keys(5).entries()) {
      await outbox.append(key, { n });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(s.batches).toEqual([]);
    await outbox.whenIdle();
    expect(s.batches).toEqual([keys(5)]);
  });

  it("without a linger, a lone record is sent at once", async () => {
    const s = await sink();
    const outbox = outboxFor(await outboxDir(), s.url);
    await outbox.start();
    const started = Date.now();
    await outbox.append("alone", { n: 1 });
    await outbox.whenIdle();
    expect(s.batches).toEqual([["alone"]]);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("splits a batch the sink refuses for good, so only the bad record is dead-lettered", async () => {
    const s = await sink();
    s.rejectKey("req_3", 422);
    const dir = await outboxDir();
    const outbox = outboxFor(dir, s.url);
    await Promise.all(keys(6).map((key, n) => outbox.append(key, { n })));
    await outbox.start();
    await outbox.whenIdle();
    expect(s.batches[0]).toEqual(keys(6));
    // Then one send per record of the refused batch.
    expect(s.batches.slice(1).every((b) => b.length === 1)).toBe(true);
    expect([...s.counted.keys()].sort()).toEqual(keys(6).filter((k) => k !== "req_3"));
    const dead = (await readFile(join(dir, "usage.dead.jsonl"), "utf8")).trim().split("\n");
    expect(dead.map((line) => (JSON.parse(line) as { key: string }).key)).toEqual(["req_3"]);
  });

  it("refuses options with both send and sendBatch, or neither", () => {
    const base = { dir: "/nonexistent", name: "x", retry: fastRetry, logger: logs().logger };
    const send = () => Promise.resolve();
    expect(() => new DurableOutbox<Rec>({ ...base, send, sendBatch: send })).toThrow(/exactly one/);
    expect(() => new DurableOutbox<Rec>(base)).toThrow(/exactly one/);
  });

  it("close stops delivery and leaves the rest for the next start", async () => {
    const s = await sink();
    s.failNext(Infinity, 503);
    const dir = await outboxDir();
    const first = outboxFor(dir, s.url);
    await first.start();
    await first.append("a", { n: 1 });
    await first.close({ drainTimeoutMs: 50 });
    await expect(first.append("b", { n: 2 })).rejects.toThrow(/closed/);
    s.failNext(0);
    const second = outboxFor(dir, s.url);
    await second.start();
    await second.whenIdle();
    expect([...s.counted.keys()]).toEqual(["a"]);
  });
});
