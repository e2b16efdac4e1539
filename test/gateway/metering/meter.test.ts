import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { Meter } from "../../../gateway/metering/meter.js";
import {
  parseUsageRecord,
  toWireUsage,
  type UsageRecord,
} from "../../../gateway/metering/usage-record.js";
import { createHttpSinkSender, isRetryableSinkError } from "../../../gateway/metering/http-sink.js";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";
import { startCountingSink } from "../outbox/sink-server.js";
import { fastRetry, logs, onCleanup, outboxDir } from "../outbox/support.js";

const TIME = "2025-03-04T05:06:07.890Z";

function usage(n: number, extra: Partial<UsageRecord> = {}): UsageRecord {
  return {
    responseId: `resp_${n}`,
    requestId: `req_${n}`,
    account: "acme",
    project: "web",
    keyId: "key_1",
    model: "tiny-gpt",
    inputTokens: n,
    outputTokens: 1,
    time: TIME,
    ...extra,
  };
}

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
  it("counts tokens and requests by account, project and model, and journals the record under its response id", async () => {
    const registry = new Registry();
    const outbox = memoryOutbox();
    const meter = new Meter({ registry, outbox });
    await meter.record(usage(12, { outputTokens: 30 }));
    await meter.record(usage(3, { outputTokens: 4 }));
    await meter.record(usage(1, { project: null, outputTokens: 0 }));

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
    expect(outbox.appended.map(([key]) => key)).toEqual(["resp_12", "resp_3", "resp_1"]);
    expect(outbox.appended[0]![1]).toEqual(usage(12, { outputTokens: 30 }));
  });

  it("shares the counters when two meters use one registry", () => {
    const registry = new Registry();
    new Meter({ registry, outbox: memoryOutbox() });
    expect(() => new Meter({ registry, outbox: memoryOutbox() })).not.toThrow();
  });

  it("refuses a bad token count instead of journaling it", async () => {
    const outbox = memoryOutbox();
    const meter = new Meter({ registry: new Registry(), outbox });
    await expect(meter.record(usage(-1))).rejects.toThrow();
    await expect(meter.record(usage(1.5))).rejects.toThrow();
    expect(outbox.appended).toHaveLength(0);
  });

  it("fails the request when the journal cannot be written", async () => {
    const meter = new Meter({
      registry: new Registry(),
      outbox: { append: () => Promise.reject(new Error("ENOSPC")) },
    });
    await expect(meter.record(usage(1))).rejects.toThrow("ENOSPC");
  });

  it("sends the documented snake_case fields to the sink", () => {
    const wire = toWireUsage(usage(1, { project: null }));
    expect(wire).toEqual({
      response_id: "resp_1",
      request_id: "req_1",
      account: "acme",
      project: null,
      key_id: "key_1",
      model: "tiny-gpt",
      input_tokens: 1,
      output_tokens: 1,
      time: TIME,
    });
  });

  it("reads back a record journaled by the previous version (keyed by request id) instead of dead-lettering it", () => {
    const legacy = {
      request_id: "req_old",
      account: "acme",
      project: null,
      model: "tiny-gpt",
      input_tokens: 5,
      output_tokens: 6,
      time: TIME,
    };
    expect(parseUsageRecord(legacy)).toEqual({
      responseId: "req_old",
      requestId: "req_old",
      account: "acme",
      project: null,
      keyId: null,
      model: "tiny-gpt",
      inputTokens: 5,
      outputTokens: 6,
      time: TIME,
    });
    expect(() => parseUsageRecord({ ...legacy, input_tokens: -1 })).toThrow();
    expect(() => parseUsageRecord({ ...usage(1), extra: true })).toThrow();
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
        sendBatch: createHttpSinkSender({
          url: sink.url,
          token: "sink-secret",
          toWire: toWireUsage,
        }),
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
    const meter = new Meter({ registry, outbox: first });
    for (let i = 0; i < 10; i += 1) await meter.record(usage(i));
    expect(await readFile(join(dir, "usage.records.jsonl"), "utf8")).toContain(
      '"responseId":"resp_9"',
    );

    const second = make();
    await second.start();
    await second.whenIdle();
    expect(sink.counted.size).toBe(10);
    expect(sink.counted.get("resp_4")).toMatchObject({
      response_id: "resp_4",
      request_id: "req_4",
      input_tokens: 4,
      time: TIME,
    });
    expect(sink.headers.every((h) => h.authorization === "Bearer sink-secret")).toBe(true);
    expect(sink.headers.every((h) => h["content-type"] === "application/json")).toBe(true);
  });

  it("delivers a journal written by the previous version after an upgrade", async () => {
    const sink = await startCountingSink();
    onCleanup(() => sink.close());
    const dir = await outboxDir();
    await mkdir(dir, { recursive: true });
    const legacy = {
      request_id: "req_before_upgrade",
      account: "acme",
      project: "web",
      model: "tiny-gpt",
      input_tokens: 7,
      output_tokens: 8,
      time: TIME,
    };
    await writeFile(
      join(dir, "usage.records.jsonl"),
      `${JSON.stringify({ key: "req_before_upgrade", at: 1, record: legacy })}\n`,
    );
    const outbox = new DurableOutbox<UsageRecord>({
      dir,
      name: "usage",
      sendBatch: createHttpSinkSender({ url: sink.url, toWire: toWireUsage }),
      retry: fastRetry,
      parse: parseUsageRecord,
      logger: logs().logger,
    });
    onCleanup(() => outbox.close());
    await outbox.start();
    await outbox.whenIdle();
    expect(sink.counted.get("req_before_upgrade")).toMatchObject({
      response_id: "req_before_upgrade",
      request_id: "req_before_upgrade",
      input_tokens: 7,
    });
  });
});
