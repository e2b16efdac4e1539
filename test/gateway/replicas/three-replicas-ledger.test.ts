import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Kysely } from "kysely";
import { completionsUsagePageSchema } from "../../../api/usage.js";
import type { Database } from "../../../gateway/store/database.js";
import type { RedisServer } from "../../support/redis-server.js";
import type { Platform } from "../support/platform.js";
import { startMixedLoad, type Outcome } from "./mixed-load.js";
import {
  ledgerTotals,
  metricOf,
  pendingRecords,
  startReplica,
  startReplicaSet,
  stopReplicaSet,
  until,
  type Replica,
  type ReplicaSet,
} from "./replica-set.js";

/**
 * Issue 15's proof, ledger half: three `modelgate gateway` processes
 * against one real PostgreSQL and one real redis-server, load on both
 * routes spread over the three, one replica SIGKILLed mid-load and
 * restarted on its state folder (as the kubelet restarts a crashed
 * container in its pod: an emptyDir outlives a container restart), whose
 * journal then replays. Afterwards the ledger holds exactly one row per
 * answered request, none for a refused one, and its sums equal the
 * answers' `usage`. The only rows no answer accounts for may come from
 * requests in flight on the killed replica at the kill: answered by the
 * runtime and journaled, their answer never left.
 *
 * Restarting it is what makes "nothing lost" hold: records it answered and
 * had journaled but not yet shipped (the usage outbox lingers up to 100 ms
 * per batch) live only in its folder until it runs again. A pod deleted
 * with its emptyDir loses them: docs/state.md, "What is at risk when".
 */
const CLIENTS = 6;

let set: ReplicaSet | undefined;
let redis: RedisServer;
let p: Platform;
let databaseUrl: string;
let db: Kysely<Database>;
const replicas: Replica[] = [];

beforeAll(async () => {
  set = await startReplicaSet({ count: 3, valkey: true, replicas });
  ({ platform: p, databaseUrl, db } = set);
  redis = set.redis!;
}, 180_000);
afterAll(() => stopReplicaSet(set, replicas));

const testStarted = Math.floor(Date.now() / 1000) - 60;

/** `GET /v1/organization/usage/completions` totals over everything since `since`, on both routes. */
async function readUsageTotals(replica: Replica, adminKey: string, since: number) {
  const res = await fetch(
    `${replica.url}/v1/organization/usage/completions?start_time=${since}&bucket_width=1d`,
    { headers: { authorization: `Bearer ${adminKey}` } },
  );
  expect(res.status).toBe(200);
  const { totals } = completionsUsagePageSchema.parse(await res.json());
  return {
    num_model_requests: totals.num_model_requests,
    input_tokens: totals.input_tokens,
    output_tokens: totals.output_tokens,
  };
}

const sum = (outcomes: Outcome[], field: "input_tokens" | "output_tokens") =>
  outcomes.reduce((total, o) => total + o.usage![field], 0);

describe("three replicas, one PostgreSQL, one Valkey, under load", () => {
  it("one replica SIGKILLed: one row per answered request, none for refused ones, sums equal the answers' usage", async () => {
    const load = startMixedLoad(p, () => replicas, { clients: CLIENTS, tag: "kill" });
    await until(
      () => Promise.resolve(load.answered()),
      (n) => n >= 90,
      60_000,
    );

    // SIGKILL mid-load: nothing released, journals as they were.
    const victim = replicas[0]!;
    const killedAt = Date.now();
    await victim.process.kill();
    const answeredByVictim = load.outcomes.filter(
      (o) => o.replica === 0 && o.status === 200 && o.endedAt <= killedAt,
    );
    const inLedgerAtKill = new Set(
      (
        await db
          .selectFrom("usage_ledger")
          .select("response_id")
          .where(
            "response_id",
            "in",
            answeredByVictim.map((o) => o.responseId!),
          )
          .execute()
      ).map((row) => row.response_id),
    );
    const onlyInJournal = answeredByVictim.length - inLedgerAtKill.size;

    // The two others serve on; then the kubelet restarts the container on
    // the same folder and it takes its share again.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    replicas[0] = await startReplica({
      platform: p,
      index: 0,
      databaseUrl,
      valkeyUrl: redis.url,
      previous: victim,
    });
    const restartedAt = Date.now();
    await until(
      () =>
        Promise.resolve(
          load.outcomes.filter((o) => o.replica === 0 && o.startedAt > restartedAt).length,
        ),
      (n) => n >= 30,
      60_000,
    );
    const outcomes = await load.stop();

    // Every journal shipped.
    for (const replica of replicas) {
      expect(
        await until(
          () => pendingRecords(replica),
          (n) => n === 0,
        ),
      ).toBe(0);
    }
    const rows = await db
      .selectFrom("usage_ledger")
      .select(["response_id", "request_id", "route", "input_tokens", "output_tokens"])
      .execute();

    const byRequestId = new Map(outcomes.map((o) => [o.requestId, o]));
    const answered = outcomes.filter((o) => o.status === 200);
    const refused = outcomes.filter((o) => o.status >= 400);
    const failed = outcomes.filter((o) => o.status === 0);
    const killedMidFlight = failed.filter((o) => o.startedAt < killedAt && o.replica === 0);
    expect(answered.length + refused.length + failed.length).toBe(outcomes.length);
    // Only the killed replica's connections failed, in flight at the kill or sent while it was down.
    expect(failed.every((o) => o.replica === 0 && o.endedAt >= killedAt)).toBe(true);
    expect(failed.every((o) => o.startedAt < restartedAt)).toBe(true);
    // Every refusal is one of the refused kinds (no 5xx, no refused good request).
    for (const o of refused) expect([401, 402, 400, 429]).toContain(o.status);
    expect(refused.filter((o) => o.kind === "api" || o.kind === "pay")).toEqual([]);

    // One row per answered request, as answered.
    const rowById = new Map(rows.map((row) => [row.response_id, row]));
    const missing = answered.filter((o) => !rowById.has(o.responseId!));
    expect(missing).toEqual([]);
    for (const o of answered) {
      const row = rowById.get(o.responseId!)!;
      expect([row.request_id, row.route, row.input_tokens, row.output_tokens]).toEqual([
        o.requestId,
        o.route,
        o.usage!.input_tokens,
        o.usage!.output_tokens,
      ]);
    }
    // Every other row is a request killed mid-flight, never a refused one.
    const answeredIds = new Set(answered.map((o) => o.responseId!));
    const unanswered = rows.filter((row) => !answeredIds.has(row.response_id));
    for (const row of unanswered) {
      const origin = byRequestId.get(row.request_id);
      expect(origin && killedMidFlight.includes(origin)).toBe(true);
    }
    expect(new Set(unanswered.map((row) => row.request_id)).size).toBe(unanswered.length);

    // The ledger's own sums: the answers' usage, plus what the kill left unanswered.
    const totals = await ledgerTotals(db);
    const extra = (field: "input_tokens" | "output_tokens") =>
      unanswered.reduce((total, row) => total + row[field], 0);
    expect(totals).toEqual({
      requests: answered.length + unanswered.length,
      inputTokens: sum(answered, "input_tokens") + extra("input_tokens"),
      outputTokens: sum(answered, "output_tokens") + extra("output_tokens"),
    });
    // The usage endpoint, read through any replica with the admin key, says the same.
    const page = await readUsageTotals(replicas[1]!, p.keys.admin.key, testStarted);
    expect(page).toEqual({
      num_model_requests: totals.requests,
      input_tokens: totals.inputTokens,
      output_tokens: totals.outputTokens,
    });
    // The three replicas really shared the work, on both routes.
    for (const index of [0, 1, 2]) {
      for (const route of ["/v1/responses", "/pay/v1/responses"]) {
        expect(answered.some((o) => o.replica === index && o.route === route)).toBe(true);
      }
    }

    const count = (list: Outcome[], route: string) => list.filter((o) => o.route === route).length;
    console.info(
      `three replicas, ledger: ${outcomes.length} requests, ` +
        `${answered.length} answered (${count(answered, "/v1/responses")} api-key, ` +
        `${count(answered, "/pay/v1/responses")} pay), ${refused.length} refused, ` +
        `${killedMidFlight.length} in flight at the SIGKILL, ` +
        `${failed.length - killedMidFlight.length} refused connection while down; ` +
        `${onlyInJournal} of the victim's ${answeredByVictim.length} answers only in its journal at the kill; ` +
        `ledger ${rows.length} rows (${unanswered.length} for requests killed mid-flight), ` +
        `tokens in ${totals.inputTokens} out ${totals.outputTokens}; answers' usage in ` +
        `${sum(answered, "input_tokens")} out ${sum(answered, "output_tokens")}`,
    );
  });

  it("Valkey restarted under load: the three answer throughout, share again, and the ledger matches the answers", async () => {
    const before = new Set(
      (await db.selectFrom("usage_ledger").select("response_id").execute()).map(
        (row) => row.response_id,
      ),
    );
    const load = startMixedLoad(p, () => replicas, { clients: CLIENTS, tag: "valkey" });
    await until(
      () => Promise.resolve(load.answered()),
      (n) => n >= 60,
    );
    await redis.stop();
    for (const replica of replicas) {
      expect(
        await until(
          () => metricOf(replica, "modelgate_gateway_valkey_up"),
          (up) => up === 0,
        ),
      ).toBe(0);
    }
    const answeredAtStart = load.answered();
    await redis.start();
    for (const replica of replicas) {
      expect(
        await until(
          () => metricOf(replica, "modelgate_gateway_valkey_up"),
          (up) => up === 1,
        ),
      ).toBe(1);
    }
    const answeredWhileDown = load.answered() - answeredAtStart;
    const restarted = load.answered();
    await until(
      () => Promise.resolve(load.answered()),
      (n) => n >= restarted + 60,
    );
    const outcomes = await load.stop();

    // Nothing failed and nothing answerable was refused: Valkey is never a reason to.
    expect(outcomes.filter((o) => o.status === 0 || o.status >= 500)).toEqual([]);
    expect(
      outcomes.filter((o) => (o.kind === "api" || o.kind === "pay") && o.status !== 200),
    ).toEqual([]);
    for (const replica of replicas) {
      expect(
        await metricOf(replica, 'modelgate_gateway_valkey_fallbacks_total{kind="rate_limit"}'),
      ).toBeGreaterThan(0);
    }
    // Shared again: a signature used on one replica is refused on the two others.
    const raw = JSON.stringify({
      model: "tiny-gpt",
      input: "after the restart",
      max_output_tokens: 1,
    });
    const headers = {
      "content-type": "application/json",
      "pay-signature": p.sign(raw),
      "pay-agent-id": "agent-after",
    };
    const statuses: number[] = [];
    for (const replica of [replicas[1]!, replicas[0]!, replicas[2]!]) {
      const res = await fetch(`${replica.url}/pay/v1/responses`, {
        method: "POST",
        headers,
        body: raw,
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 401, 401]);

    // The ledger: one row per answered request of this load (and the one above).
    for (const replica of replicas) {
      expect(
        await until(
          () => pendingRecords(replica),
          (n) => n === 0,
        ),
      ).toBe(0);
    }
    const answered = outcomes.filter((o) => o.status === 200);
    const rows = (
      await db
        .selectFrom("usage_ledger")
        .select(["response_id", "request_id", "input_tokens", "output_tokens"])
        .execute()
    ).filter((row) => !before.has(row.response_id));
    const byResponseId = new Map(answered.map((o) => [o.responseId!, o]));
    const fromLoad = rows.filter((row) => byResponseId.has(row.response_id));
    expect(fromLoad.length).toBe(answered.length);
    expect(rows.length - fromLoad.length).toBe(1); // the signature check's one 200
    for (const row of fromLoad) {
      const o = byResponseId.get(row.response_id)!;
      expect([row.request_id, row.input_tokens, row.output_tokens]).toEqual([
        o.requestId,
        o.usage!.input_tokens,
        o.usage!.output_tokens,
      ]);
    }
    console.info(
      `three replicas, Valkey restarted under load: ${outcomes.length} requests, ` +
        `${answered.length} answered (${answeredWhileDown} while it was away), ` +
        `${outcomes.length - answered.length} refused, none failed; ledger ${fromLoad.length} rows for them`,
    );
  });
});
