import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { Kysely } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../gateway/store/database.js";
import type { PostgresServer } from "../../support/postgres-server.js";
import { GEN } from "../conformance/support.js";
import type { Platform } from "../support/platform.js";
import { startMixedLoad, type Outcome } from "./mixed-load.js";
import {
  logsWith,
  metricOf,
  owedInFolder,
  pendingRecords,
  startReplica,
  startReplicaSet,
  stopReplicaSet,
  until,
  type Replica,
  type ReplicaSet,
} from "./replica-set.js";

/**
 * What is at risk when the ledger's PostgreSQL is away, with real gateway
 * processes: they keep serving, and say how many records wait and in which
 * file; what a replica's folder holds is exactly what deleting the folder
 * loses. A clean stop with the database up first ships what waits, so a
 * rollout that deletes pods with their emptyDir loses nothing.
 */
let set: ReplicaSet | undefined;
let postgres: PostgresServer;
let p: Platform;
let databaseUrl: string;
let db: Kysely<Database>;
const started: Replica[] = [];

beforeAll(async () => {
  set = await startReplicaSet({ count: 0, valkey: false, replicas: started });
  ({ postgres, platform: p, databaseUrl, db } = set);
}, 180_000);
afterAll(() => stopReplicaSet(set, started));

async function replica(index: number, previous?: Replica): Promise<Replica> {
  const r = await startReplica({
    platform: p,
    index,
    databaseUrl,
    logLevel: "info",
    ...(previous ? { previous } : {}),
  });
  started.push(r);
  return r;
}

async function ledgerIds(): Promise<Set<string>> {
  const rows = await db.selectFrom("usage_ledger").select("response_id").execute();
  return new Set(rows.map((row) => row.response_id));
}

const answeredOn = (outcomes: Outcome[], r: Replica, route?: string) =>
  outcomes.filter(
    (o) => o.status === 200 && o.replica === r.index && (!route || o.route === route),
  );

describe("reads of the store while its PostgreSQL is away", () => {
  it("answer 503 with Retry-After, never a 500, and read again once it is back", async () => {
    const r = await replica(3);
    await until(
      () => metricOf(r, "modelgate_gateway_store_up"),
      (up) => up === 1,
    );
    const key = { "x-api-key": p.keys.acme.key };
    const asked = [
      ["GET", "/v1/files", undefined],
      ["GET", "/v1/batches", undefined],
      ["GET", `/v1/batches/batch_${"0".repeat(24)}`, undefined],
      ["GET", `/v1/responses/resp_${"0".repeat(48)}`, undefined],
      ["GET", "/v1/organization/usage/completions?start_time=0", undefined],
      [
        "POST",
        "/v1/batches",
        {
          input_file_id: `file-${"0".repeat(24)}`,
          endpoint: "/v1/responses",
          completion_window: "24h",
        },
      ],
      ["POST", "/v1/responses", { ...GEN, previous_response_id: `resp_${"0".repeat(48)}` }],
    ] as const;
    const ask = async ([method, path, body]: (typeof asked)[number]) => {
      const res = await fetch(`${r.url}${path}`, {
        method,
        headers: body ? { ...key, "content-type": "application/json" } : key,
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return {
        path,
        status: res.status,
        retryAfter: res.headers.get("retry-after"),
        body: await res.text(),
      };
    };
    await postgres.halt();
    try {
      for (const request of asked) {
        const answer = await ask(request);
        expect(answer.status, `${request[0]} ${answer.path}: ${answer.body}`).toBe(503);
        expect(Number(answer.retryAfter), answer.path).toBeGreaterThan(0);
        expect(JSON.parse(answer.body), answer.path).toMatchObject({
          error: { type: "server_error" },
        });
      }
    } finally {
      await postgres.resume();
    }
    // Back: the same reads are answered again (404s for ids that never were).
    for (const request of asked) {
      const answer = await until(
        () => ask(request),
        (a) => a.status !== 503,
        30_000,
      );
      expect(answer.status, `${request[0]} ${answer.path}: ${answer.body}`).toBeLessThan(500);
    }
    expect(await r.process.stop()).toBe(0);
    await rm(r.stateDir, { recursive: true, force: true });
  });
});

describe("the ledger's PostgreSQL and the replicas' state folders", () => {
  it("a replica stopped (SIGTERM) as the database comes back ships what waits first: its folder then owes nothing", async () => {
    const r = await replica(0);
    await until(
      () => metricOf(r, "modelgate_gateway_store_up"),
      (up) => up === 1,
    );
    // A short outage: records wait behind the outbox's backoff ...
    await postgres.halt();
    const load = startMixedLoad(p, () => [r], { clients: 4, tag: "sigterm" });
    await until(
      () => Promise.resolve(load.answered()),
      (n) => n >= 30,
    );
    const outcomes = await load.stop();
    await until(
      () => Promise.resolve(logsWith(r, "outbox delivery failed; will retry").length),
      (n) => n > 0,
    );
    expect(await pendingRecords(r)).toBeGreaterThan(0);
    // ... the database is back, and the pod is deleted at once (a rollout):
    // the stop delivers before it exits, so the emptyDir going owes nothing.
    await postgres.resume();
    expect(await r.process.stop()).toBe(0);
    expect(await owedInFolder(r.stateDir)).toEqual([]);
    const ids = await ledgerIds();
    expect(answeredOn(outcomes, r).filter((o) => !ids.has(o.responseId!))).toEqual([]);
    await rm(r.stateDir, { recursive: true, force: true });
  });

  it("the database down: replicas serve and say how many records wait and where; a folder lost loses exactly those", async () => {
    // Two replicas, the store open on both; then the server stops.
    const [kept, deleted] = await Promise.all([replica(1), replica(2)]);
    await until(
      () => metricOf(kept, "modelgate_gateway_store_up"),
      (up) => up === 1,
    );
    await until(
      () => metricOf(deleted, "modelgate_gateway_store_up"),
      (up) => up === 1,
    );
    const before = await ledgerIds();
    await postgres.halt();

    const load = startMixedLoad(p, () => [kept, deleted], { clients: 4, tag: "down" });
    await until(
      () => Promise.resolve(load.answered()),
      (n) => n >= 60,
    );
    const outcomes = await load.stop();
    // Serving as usual: every answerable request answered, the others refused as ever.
    expect(outcomes.filter((o) => o.status === 0 || o.status >= 500)).toEqual([]);
    expect(
      outcomes.filter((o) => (o.kind === "api" || o.kind === "pay") && o.status !== 200),
    ).toEqual([]);

    for (const r of [kept, deleted]) {
      // The metrics: the database away, and how many records wait, per journal.
      expect(
        await until(
          () => metricOf(r, "modelgate_gateway_store_up"),
          (up) => up === 0,
        ),
      ).toBe(0);
      expect(await metricOf(r, 'modelgate_outbox_pending_records{outbox="usage"}')).toBe(
        answeredOn(outcomes, r, "/v1/responses").length,
      );
      expect(await metricOf(r, 'modelgate_outbox_pending_records{outbox="settlements"}')).toBe(
        answeredOn(outcomes, r, "/pay/v1/responses").length,
      );
      // The log: how many wait, and the file they wait in.
      const failures = logsWith(r, "outbox delivery failed; will retry");
      expect(failures.length).toBeGreaterThan(0);
      expect(failures.map((entry) => entry.journal)).toContain(
        join(r.stateDir, "usage", "usage.records.jsonl"),
      );
      expect(failures.every((entry) => typeof entry.pending === "number")).toBe(true);
    }

    // One replica's pod is deleted while the database is down: SIGTERM, its
    // drain cannot reach the database, it says what it leaves and where ...
    const startedStop = Date.now();
    expect(await deleted.process.stop()).toBe(0);
    const stopMs = Date.now() - startedStop;
    const leftBehind = logsWith(
      deleted,
      "outbox closed with records waiting; they are sent after the next start on this folder",
    );
    expect(
      Object.fromEntries(leftBehind.map((entry) => [entry.outbox, [entry.pending, entry.journal]])),
    ).toEqual({
      usage: [
        answeredOn(outcomes, deleted, "/v1/responses").length,
        join(deleted.stateDir, "usage", "usage.records.jsonl"),
      ],
      settlements: [
        answeredOn(outcomes, deleted, "/pay/v1/responses").length,
        join(deleted.stateDir, "settlements", "settlements.records.jsonl"),
      ],
    });
    // ... and what its folder owes is exactly what it answered: lost with the folder.
    const lost = answeredOn(outcomes, deleted).map((o) => o.responseId!);
    expect((await owedInFolder(deleted.stateDir)).sort()).toEqual([...lost].sort());
    await rm(deleted.stateDir, { recursive: true, force: true });

    // The other's container restarts on its folder, and the database comes back.
    await kept.process.kill();
    const restarted = await replica(1, kept);
    await postgres.resume();
    expect(
      await until(
        () => pendingRecords(restarted),
        (n) => n === 0,
        90_000,
      ),
    ).toBe(0);
    const ids = await ledgerIds();
    const landed = [...ids].filter((id) => !before.has(id));
    expect(landed.sort()).toEqual(
      answeredOn(outcomes, kept)
        .map((o) => o.responseId!)
        .sort(),
    );
    expect(lost.filter((id) => ids.has(id))).toEqual([]);
    console.info(
      `database down: ${outcomes.length} requests on two replicas, ` +
        `${outcomes.filter((o) => o.status === 200).length} answered; ` +
        `kept folder: ${answeredOn(outcomes, kept).length} records waited, all landed; ` +
        `deleted folder: ${lost.length} records lost (as its log and journal said); ` +
        `SIGTERM with the database down took ${stopMs} ms`,
    );
  });
});
