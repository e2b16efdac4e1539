import { appendFile, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DurableOutbox } from "../../../gateway/outbox/durable-outbox.js";
import { replayJournals, splitCompleteLines } from "../../../gateway/outbox/journal-lines.js";
import { backoffDelayMs } from "../../../gateway/outbox/backoff.js";
import { fastRetry, logs, onCleanup, outboxDir } from "./support.js";

interface Rec {
  n: number;
}

/** A send that records what it was given and can be held back per key. */
function recordingSend() {
  const delivered: string[] = [];
  const held = new Map<string, () => void>();
  const holdKeys = new Set<string>();
  return {
    delivered,
    hold: (key: string) => holdKeys.add(key),
    release: (key: string) => held.get(key)?.(),
    send: (_record: Rec, key: string): Promise<void> => {
      if (!holdKeys.has(key)) {
        delivered.push(key);
        return Promise.resolve();
      }
      return new Promise<void>((resolve) =>
        held.set(key, () => {
          delivered.push(key);
          resolve();
        }),
      );
    },
  };
}

function make(dir: string, send: (r: Rec, k: string) => Promise<void>, extra = {}) {
  const outbox = new DurableOutbox<Rec>({
    dir,
    name: "usage",
    send,
    retry: fastRetry,
    logger: logs().logger,
    ...extra,
  });
  onCleanup(() => outbox.close());
  return outbox;
}

const line = (key: string, n: number) => `${JSON.stringify({ key, at: 1, record: { n } })}\n`;

describe("journal lines", () => {
  it("ignores an incomplete trailing line and reports it as torn", () => {
    expect(splitCompleteLines('{"a":1}\n{"b":2}\n{"c":')).toEqual({
      lines: ['{"a":1}', '{"b":2}'],
      completeBytes: 16,
      torn: true,
    });
    expect(splitCompleteLines("").torn).toBe(false);
    expect(splitCompleteLines('{"a":1}\n').torn).toBe(false);
  });

  it("replay: first copy of a key wins, acked keys are not pending, bad lines are counted", () => {
    const records = [line("a", 1), line("b", 2), line("a", 3), "not json\n", line("c", 4)]
      .join("")
      .trim()
      .split("\n");
    const acks = [
      '{"key":"b","at":2,"outcome":"delivered"}',
      '{"key":"zzz","at":2,"outcome":"delivered"}',
    ];
    const replay = replayJournals(records, acks);
    expect(replay.pending.map((p) => [p.key, p.record])).toEqual([
      ["a", { n: 1 }],
      ["c", { n: 4 }],
    ]);
    expect([...replay.acked]).toEqual(["b"]);
    expect(replay.corruptLines).toBe(1);
  });

  it("backoff grows exponentially, is capped, and keeps a jitter floor", () => {
    const policy = { baseDelayMs: 100, maxDelayMs: 1_000 };
    expect([1, 2, 3, 4, 5, 10].map((n) => backoffDelayMs(n, policy, () => 1))).toEqual([
      100, 200, 400, 800, 1000, 1000,
    ]);
    expect(backoffDelayMs(3, policy, () => 0)).toBe(200);
  });
});

describe("outbox recovery", () => {
  it("tolerates a torn last line after a crash, and appends cleanly after it", async () => {
    const dir = await outboxDir();
    const path = join(dir, "usage.records.jsonl");
    await writeFile(path, line("a", 1) + line("b", 2) + '{"key":"c","at":1,"rec');
    const s = recordingSend();
    const outbox = make(dir, s.send);
    await outbox.open();
    expect(outbox.pending()).toBe(2);
    await outbox.append("d", { n: 4 });
    const text = await readFile(path, "utf8");
    expect(text).toBe(line("a", 1) + line("b", 2) + text.split("\n")[2] + "\n");
    expect(text.split("\n")[2]).toContain('"key":"d"');
    await outbox.start();
    await outbox.whenIdle();
    expect(s.delivered).toEqual(["a", "b", "d"]);
  });

  it("a torn ack line re-sends that record (at least once), never loses it", async () => {
    const dir = await outboxDir();
    await writeFile(join(dir, "usage.records.jsonl"), line("a", 1) + line("b", 2));
    await writeFile(
      join(dir, "usage.acks.jsonl"),
      '{"key":"a","at":1,"outcome":"delivered"}\n{"key":"b","at',
    );
    const s = recordingSend();
    const outbox = make(dir, s.send);
    await outbox.start();
    await outbox.whenIdle();
    expect(s.delivered).toEqual(["b"]);
  });

  it("compaction keeps the records still pending and drops the delivered ones", async () => {
    const dir = await outboxDir();
    const s = recordingSend();
    s.hold("slow");
    const outbox = make(dir, s.send, { compactAfterAcks: 5, concurrency: 2 });
    await outbox.start();
    await outbox.append("slow", { n: 0 });
    for (let n = 1; n <= 8; n += 1) await outbox.append(`k${n}`, { n });
    await expect.poll(() => s.delivered.length).toBe(8);
    await expect
      .poll(
        async () =>
          (await readFile(join(dir, "usage.records.jsonl"), "utf8")).trim().split("\n").length,
      )
      .toBeLessThan(9);
    const records = await readFile(join(dir, "usage.records.jsonl"), "utf8");
    expect(records).toContain('"key":"slow"');

    // A crash now: the next process owes exactly "slow".
    const next = make(dir, () => Promise.resolve());
    await next.open();
    expect(next.pending()).toBe(1);
    s.release("slow");
  });

  it("parks a non-retryable failure in the dead-letter file, logs it, and never re-sends it", async () => {
    const dir = await outboxDir();
    const { logger, lines } = logs();
    let calls = 0;
    const outbox = make(
      dir,
      (_r, key) => {
        calls += 1;
        return key === "bad" ? Promise.reject(new Error("400 bad record")) : Promise.resolve();
      },
      { logger, isRetryable: () => false },
    );
    await outbox.start();
    await outbox.append("good", { n: 1 });
    await outbox.append("bad", { n: 2 });
    await outbox.whenIdle();
    expect(calls).toBe(2);
    const dead = (await readFile(join(dir, "usage.dead.jsonl"), "utf8")).trim().split("\n");
    expect(dead).toHaveLength(1);
    expect(JSON.parse(dead[0]!)).toMatchObject({
      key: "bad",
      attempts: 1,
      error: "400 bad record",
      record: { n: 2 },
    });
    expect(lines.some((l) => l.includes("dead-letter") && l.includes('"key":"bad"'))).toBe(true);
    await outbox.close();

    const next = make(dir, () => Promise.reject(new Error("must not be called")));
    await next.open();
    expect(next.pending()).toBe(0);
  });

  it("dead-letters a record that used up maxAttempts", async () => {
    const dir = await outboxDir();
    let calls = 0;
    const outbox = make(
      dir,
      () => {
        calls += 1;
        return Promise.reject(new Error("503"));
      },
      { retry: { ...fastRetry, maxAttempts: 3 } },
    );
    await outbox.start();
    await outbox.append("x", { n: 1 });
    await outbox.whenIdle();
    expect(calls).toBe(3);
    expect(await readFile(join(dir, "usage.dead.jsonl"), "utf8")).toContain('"attempts":3');
  });

  it("dead-letters a journaled record that fails validation on replay", async () => {
    const dir = await outboxDir();
    await writeFile(join(dir, "usage.records.jsonl"), line("ok", 1));
    await appendFile(
      join(dir, "usage.records.jsonl"),
      `${JSON.stringify({ key: "odd", at: 1, record: { n: "x" } })}\n`,
    );
    const s = recordingSend();
    const outbox = make(dir, s.send, {
      parse: (value: unknown) => {
        if (typeof (value as Rec).n !== "number") throw new Error("n must be a number");
        return value as Rec;
      },
    });
    await outbox.start();
    await outbox.whenIdle();
    expect(s.delivered).toEqual(["ok"]);
    expect(await readFile(join(dir, "usage.dead.jsonl"), "utf8")).toContain('"key":"odd"');
  });
});
