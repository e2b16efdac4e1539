import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { Meter, toUsageRecord } from "../../../gateway/metering/meter.js";
import { parseUsageRecord, type UsageRecord } from "../../../gateway/metering/usage-record.js";
import { createHttpSinkSender, isRetryableSinkError } from "../../../gateway/metering/http-sink.js";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";
import { startCountingSink } from "../outbox/sink-server.js";
import { fastRetry, logs, onCleanup, outboxDir } from "../outbox/support.js";

const fixedNow = () => new Date("2025-03-04T05:06:07.890Z");

function memoryOutbox() {
  const appended: [string, UsageRecord][] = [];
  return {
    appended,
    append: (key: string, record: UsageRecord) => {
      appended.push([key, record]);
      return Promise.resolve();
    },
  };
}

describe("Meter", () => {
  it("counts tokens and requests by account, project and model, and journals the record", async () => {
    const registry = new Registry();
    const outbox = memoryOutbox();
    const meter = new Meter({ registry, outbox, now: fixedNow });
    await meter.record({
      request_id: "req_1",
      account: "acme",
      project: "web",
      model: "tiny-gpt",
      input_tokens: 12,
      output_tokens: 30,
    });
    await meter.record({
      request_id: "req_2",
      account: "acme",
      project: "web",
      model: "tiny-gpt",
      input_tokens: 3,
      output_tokens: 4,
    });
    await meter.record({
      request_id: "req_3",
      account: "acme",
      model: "tiny-gpt",
      input_tokens: 1,
      output_tokens: 0,
    });

    const text = await registry.metrics();
    expect(text).toContain(
      'modelgate_gateway_tokens_total{account="acme",project="web",model="tiny-gpt",direction="input"} 15',
    );
    expect(text).toContain(
      'modelgate_gateway_tokens_total{account="acme",project="web",model="tiny-gpt",direction="output"} 34',
    );
    expect(text).toContain(
      'modelgate_gateway_metered_requests_total{account="acme",project="web",model="tiny-gpt"} 2',
    );
    expect(text).toContain(
      'modelgate_gateway_metered_requests_total{account="acme",project="",model="tiny-gpt"} 1',
    );

    expect(outbox.appended.map(([key]) => key)).toEqual(["req_1", "req_2", "req_3"]);
    expect(outbox.appended[0]![1]).toEqual({
      request_id: "req_1",
      account: "acme",
      project: "web",
      model: "tiny-gpt",
      input_tokens: 12,
      output_tokens: 30,
      time: "2025-03-04T05:06:07.890Z",
    });
    expect(outbox.appended[2]![1].project).toBeNull();
  });

  it("shares the counters when two meters use one registry", () => {
    const registry = new Registry();
    new Meter({ registry, outbox: memoryOutbox() });
    expect(() => new Meter({ registry, outbox: memoryOutbox() })).not.toThrow();
  });

  it("refuses a bad token count instead of journaling it", async () => {
    const outbox = memoryOutbox();
    const meter = new Meter({ registry: new Registry(), outbox });
    await expect(
      meter.record({
        request_id: "r",
        account: "a",
        model: "m",
        input_tokens: -1,
        output_tokens: 0,
      }),
    ).rejects.toThrow();
    expect(outbox.appended).toHaveLength(0);
  });

  it("fails the request when the journal cannot be written", async () => {
    const meter = new Meter({
      registry: new Registry(),
      outbox: { append: () => Promise.reject(new Error("ENOSPC")) },
    });
    await expect(
      meter.record({
        request_id: "r",
        account: "a",
        model: "m",
        input_tokens: 1,
        output_tokens: 1,
      }),
    ).rejects.toThrow("ENOSPC");
  });

  it("builds records with the documented fields", () => {
    const record = toUsageRecord(
      {
        request_id: "r",
        account: "a",
        project: null,
        model: "m",
        input_tokens: 1,
        output_tokens: 2,
      },
      fixedNow(),
    );
    expect(parseUsageRecord(record)).toEqual(record);
    expect(Object.keys(record)).toEqual([
      "request_id",
      "account",
      "project",
      "model",
      "input_tokens",
      "output_tokens",
      "time",
    ]);
  });
});

describe("metering end to end", () => {
  it("meters through a durable outbox to an HTTP sink, each request billed once across a restart", async () => {
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    sink.failNext(3, 503);
    const dir = await outboxDir();
    const make = () => {
      const outbox = new DurableOutbox<UsageRecord>({
        dir,
        name: "usage",
        sendBatch: createHttpSinkSender({ url: sink.url, token: "sink-secret" }),
        isRetryable: isRetryableSinkError,
        retry: fastRetry,
        parse: parseUsageRecord,
        logger: logs().logger,
      });
      onCleanup(() => outbox.close());
      return outbox;
    };
    const registry = new Registry();
    const first = make();
    await first.open(); // journals but never delivers: the process "crashes"
    const meter = new Meter({ registry, outbox: first, now: fixedNow });
    for (let i = 0; i < 10; i += 1) {
      await meter.record({
        request_id: `req_${i}`,
        account: "acme",
        model: "m",
        input_tokens: i,
        output_tokens: 1,
      });
    }
    expect(await readFile(join(dir, "usage.records.jsonl"), "utf8")).toContain(
      '"request_id":"req_9"',
    );

    const second = make();
    await second.start();
    await second.whenIdle();
    expect(sink.counted.size).toBe(10);
    expect(sink.counted.get("req_4")).toMatchObject({
      request_id: "req_4",
      input_tokens: 4,
      time: "2025-03-04T05:06:07.890Z",
    });
    expect(sink.headers.every((h) => h.authorization === "Bearer sink-secret")).toBe(true);
    expect(sink.headers.every((h) => h["content-type"] === "application/json")).toBe(true);
  });
});
