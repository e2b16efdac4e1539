import type { Kysely } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../gateway/store/database.js";
import type { PostgresServer } from "../../support/postgres-server.js";
import type { Platform } from "../support/platform.js";
import { startMixedLoad, type Outcome } from "./mixed-load.js";
import {
  ledgerTotals,
  metricOf,
  pendingRecords,
  startReplicaSet,
  stopReplicaSet,
  until,
  type Replica,
  type ReplicaSet,
} from "./replica-set.js";

/**
 * Issue 15: "a database outage of a minute under load loses nothing once
 * it is back". Three gateway processes, one PostgreSQL, one redis-server;
 * load on both routes throughout; the server is stopped for 60 s and
 * started again on the same port and data folder. Afterwards the ledger
 * holds exactly one row per answered request and nothing else.
 *
 * Wall time: the outage itself, then however long the outboxes' backoff
 * (half a second doubling to a minute, half of it random) keeps them from
 * probing again: up to a minute more.
 */
const OUTAGE_MS = 60_000;

let set: ReplicaSet | undefined;
let postgres: PostgresServer;
let p: Platform;
let db: Kysely<Database>;
const replicas: Replica[] = [];

beforeAll(async () => {
  set = await startReplicaSet({ count: 3, valkey: true, replicas });
  ({ postgres, platform: p, db } = set);
}, 180_000);
afterAll(() => stopReplicaSet(set, replicas));

const sum = (outcomes: Outcome[], field: "input_tokens" | "output_tokens") =>
  outcomes.reduce((total, o) => total + o.usage![field], 0);

describe("a minute without the ledger's PostgreSQL, three replicas under load", () => {
  it("loses nothing: afterwards one row per answered request, none for refused ones", async () => {
    // A steady trickle rather than all the machine can take: a minute of it.
    const load = startMixedLoad(p, () => replicas, { clients: 3, tag: "outage", pauseMs: 20 });
    await until(
      () => Promise.resolve(load.answered()),
      (n) => n >= 30,
    );
    await postgres.halt();
    const haltedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    // Every answer that ended by now was journaled before it was sent.
    const readAt = Date.now();
    const waiting = await Promise.all(replicas.map(pendingRecords));
    const storeUp = await Promise.all(
      replicas.map((r) => metricOf(r, "modelgate_gateway_store_up")),
    );
    await postgres.resume();
    const resumedAt = Date.now();
    const answeredDuringOutage = load.outcomes.filter(
      (o) => o.status === 200 && o.startedAt >= haltedAt && o.endedAt <= readAt,
    ).length;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const outcomes = await load.stop();

    expect(storeUp).toEqual([0, 0, 0]);
    // What waited at the end of the outage is at least what was answered during it.
    expect(waiting.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(answeredDuringOutage);
    const drained = await Promise.all(
      replicas.map((r) =>
        until(
          () => pendingRecords(r),
          (n) => n === 0,
          90_000,
        ),
      ),
    );
    expect(drained).toEqual([0, 0, 0]);
    const drainedMs = Date.now() - resumedAt;

    // Served throughout: nothing failed, every answerable request answered.
    expect(outcomes.filter((o) => o.status === 0 || o.status >= 500)).toEqual([]);
    expect(
      outcomes.filter((o) => (o.kind === "api" || o.kind === "pay") && o.status !== 200),
    ).toEqual([]);
    const answered = outcomes.filter((o) => o.status === 200);
    const rows = await db
      .selectFrom("usage_ledger")
      .select(["response_id", "request_id", "input_tokens", "output_tokens"])
      .execute();
    const byResponseId = new Map(answered.map((o) => [o.responseId!, o]));
    // Exactly the answered requests, each as answered; nothing for a refused one.
    expect(rows.filter((row) => !byResponseId.has(row.response_id))).toEqual([]);
    expect(rows.length).toBe(answered.length);
    for (const row of rows) {
      const o = byResponseId.get(row.response_id)!;
      expect([row.request_id, row.input_tokens, row.output_tokens]).toEqual([
        o.requestId,
        o.usage!.input_tokens,
        o.usage!.output_tokens,
      ]);
    }
    expect(await ledgerTotals(db)).toEqual({
      requests: answered.length,
      inputTokens: sum(answered, "input_tokens"),
      outputTokens: sum(answered, "output_tokens"),
    });
    console.info(
      `database outage of ${OUTAGE_MS / 1000} s, three replicas: ${outcomes.length} requests, ` +
        `${answered.length} answered (${answeredDuringOutage} during the outage), ` +
        `${outcomes.length - answered.length} refused; records waiting at its end per replica ` +
        `${waiting.join("/")}; all in the ledger ${drainedMs} ms after it was back; ` +
        `ledger ${rows.length} rows`,
    );
  }, 240_000);
});
