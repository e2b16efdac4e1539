import { Redis } from "iovalkey";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { leaseChunk } from "../../../gateway/shared-state/leased-limiter.js";
import { RATE_LIMIT_KEY_PREFIX } from "../../../gateway/shared-state/valkey-limiter.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { startPlatform, type Platform } from "../support/platform.js";
import {
  countOf as count,
  metricOf,
  sendRequests,
  startGatewayReplica,
  type GatewayReplica as Replica,
} from "./gateway-processes.js";

/**
 * Three `modelgate gateway` processes on one redis-server with a limit large
 * enough for leases (L = 300, three replicas: each may hold a chunk of 5
 * units ahead): the three still admit between 0.95 L and L of a key's
 * limit however the client spreads, most decisions are taken from leases
 * without a round trip, and a replica stopped with SIGTERM gives its
 * leases back. three-processes.test.ts keeps L = 60, where the chunk is 1:
 * no lease, the shared limiter as before.
 */
const L = 300;
const CHUNK = leaseChunk({ requestsPerMinute: 1, burst: L }, 3);

let redis: RedisServer;
let p: Platform;
let valkey: Redis;
const replicas: Replica[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  valkey = new Redis(redis.url);
  p = await startPlatform({ config: { rateLimitPerMinute: 1, rateLimitBurst: L } });
  replicas.push(
    ...(await Promise.all(
      [0, 1, 2].map((index) => startGatewayReplica(p, redis, { index, burst: L, replicas: 3 })),
    )),
  );
}, 180_000);
afterAll(async () => {
  for (const replica of replicas) await replica.process.stop();
  valkey?.disconnect();
  await p?.close();
  await redis?.close();
});

const decisions = async (decided: "leased" | "shared") => {
  const each = await Promise.all(
    replicas.map((r) =>
      metricOf(r, `modelgate_gateway_rate_limit_decisions_total{decided="${decided}"}`),
    ),
  );
  return each.reduce((a, b) => a + b, 0);
};

const fallbacks = async () => {
  const each = await Promise.all(
    replicas.map((r) => metricOf(r, "modelgate_gateway_valkey_fallbacks_total")),
  );
  return each.reduce((a, b) => a + b, 0);
};

/** The key's shared request bucket in Valkey: whole units left (a missing bucket is full). */
async function sharedLeft(keyId: string): Promise<number> {
  const v = await valkey.hget(`${RATE_LIMIT_KEY_PREFIX}key:${keyId}:requests`, "v");
  return v === null ? L : Math.floor(Number(v));
}

describe("three gateway processes with leased units", () => {
  it("a key with a limit of L admits between 0.95 L and L across the three, however spread", async () => {
    expect(CHUNK).toBe(5);
    const spread = await sendRequests(p.keys.acme.key, 2 * L, (i) => replicas[i % 3]!);
    // Shared throughout: a Valkey call slower than the command timeout would have
    // decided from the fallback's per-replica share, which is not what is tested here.
    expect(await fallbacks()).toBe(0);
    expect(count(spread, 200) + count(spread, 429)).toBe(2 * L);
    expect(count(spread, 200)).toBeGreaterThanOrEqual(Math.ceil(0.95 * L));
    expect(count(spread, 200)).toBeLessThanOrEqual(L);
    const skewed = await sendRequests(
      p.keys.acmeWeb.key,
      2 * L,
      (i) => replicas[i % 5 === 0 ? 1 : 2]!,
    );
    expect(await fallbacks()).toBe(0);
    expect(count(skewed, 200) + count(skewed, 429)).toBe(2 * L);
    expect(count(skewed, 200)).toBeGreaterThanOrEqual(Math.ceil(0.95 * L));
    expect(count(skewed, 200)).toBeLessThanOrEqual(L);
    const [leased, shared] = [await decisions("leased"), await decisions("shared")];
    // While units last, about CHUNK of every CHUNK + 1 admitted requests were decided locally.
    expect(leased).toBeGreaterThan(L);
    console.info(
      `three replicas with leases, L=${L}, chunk ${CHUNK}: ${count(spread, 200)} of ${2 * L} ` +
        `admitted round robin, ${count(skewed, 200)} of ${2 * L} skewed (1:4 over two ` +
        `replicas); ${leased} decisions from leases, ${shared} sent to Valkey`,
    );
  });

  it("stopped with SIGTERM, the replicas give their leases back to the shared bucket", async () => {
    const key = p.keys.admin;
    // One at a time, seven a replica: a shared take leasing 5, five from the lease, a shared take leasing 5.
    const statuses = await sendRequests(key.key, 21, (i) => replicas[i % 3]!, 1);
    expect(count(statuses, 200)).toBe(21);
    const held = L - 21 - (await sharedLeft(key.id));
    expect(held).toBe(3 * CHUNK);
    for (const replica of replicas) expect(await replica.process.stop()).toBe(0);
    expect(await sharedLeft(key.id)).toBe(L - 21);
  });
});
