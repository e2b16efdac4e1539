import { Redis } from "iovalkey";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Limiter } from "../../../gateway/rate-limit/limiter.js";
import { InProcessLimiter, RateLimiter } from "../../../gateway/rate-limit/rate-limiter.js";
import { MAX_BATCH, ValkeyLimiter } from "../../../gateway/shared-state/valkey-limiter.js";
import { ValkeyUsedSignatures } from "../../../gateway/shared-state/valkey-used-signatures.js";
import {
  InProcessUsedSignatures,
  type UsedSignatures,
} from "../../../gateway/pay/used-signatures.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";

/**
 * The same contract for the in-process limiter and the Valkey one (a real
 * redis-server): all-or-nothing takes, balances and resets for the headers,
 * settlements. Rates are a unit a minute so nothing refills mid-test.
 */
let server: RedisServer;
let client: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  client = new Redis(server.url, { lazyConnect: true });
  await client.connect();
});
afterAll(async () => {
  client?.disconnect();
  await server?.close();
});

const slow = (burst: number) => ({ requestsPerMinute: 1, burst });
let run = 0;

describe.each([
  ["in-process", () => new InProcessLimiter(new RateLimiter())],
  ["valkey", () => new ValkeyLimiter(client)],
] as Array<[string, () => Limiter]>)("%s limiter", (_name, make) => {
  // Fresh bucket names per test: the redis server outlives each test.
  const id = (name: string) => `t${++run}:${name}`;

  it("takes until the burst is spent, then refuses with the wait for one unit", async () => {
    const limiter = make();
    const a = id("a");
    const first = await limiter.take([{ id: a, limits: slow(2), cost: 1 }]);
    expect(first).toEqual({ ok: true, states: [{ limit: 2, remaining: 1, resetMs: 60_000 }] });
    expect((await limiter.take([{ id: a, limits: slow(2), cost: 1 }])).ok).toBe(true);
    const refused = await limiter.take([{ id: a, limits: slow(2), cost: 1 }]);
    expect(refused.ok).toBe(false);
    expect(refused.ok ? 0 : refused.retryAfterSeconds).toBeGreaterThan(58);
    expect(refused.ok ? 0 : refused.retryAfterSeconds).toBeLessThanOrEqual(60);
    expect(refused.states[0]!.remaining).toBe(0);
  });

  it("takes from every bucket or from none", async () => {
    const limiter = make();
    const requests = id("requests");
    const tokens = id("tokens");
    const both = (cost: number) =>
      limiter.take([
        { id: requests, limits: slow(5), cost: 1 },
        { id: tokens, limits: slow(100), cost },
      ]);
    expect((await both(80)).ok).toBe(true);
    const refused = await both(30);
    expect(refused.ok).toBe(false);
    // Nothing was taken from the request bucket by the refused call.
    expect(refused.states.map((s) => s.remaining)).toEqual([4, 20]);
    const fits = await both(20);
    expect(fits.ok).toBe(true);
    expect(fits.states.map((s) => s.remaining)).toEqual([3, 0]);
  });

  it("reads a balance with cost 0 without taking", async () => {
    const limiter = make();
    const a = id("read");
    const read = await limiter.take([{ id: a, limits: slow(7), cost: 0 }]);
    expect(read).toEqual({ ok: true, states: [{ limit: 7, remaining: 7, resetMs: 0 }] });
  });

  it("settles a reservation: unused units come back, overuse becomes a debt", async () => {
    const limiter = make();
    const a = id("settle");
    await limiter.take([{ id: a, limits: slow(100), cost: 60 }]);
    await limiter.settle(a, slow(100), -50); // used 10 of 60
    const after = await limiter.take([{ id: a, limits: slow(100), cost: 0 }]);
    expect(after.states[0]!.remaining).toBe(90);
    await limiter.settle(a, slow(100), 120); // used 120 more than reserved
    const owed = await limiter.take([{ id: a, limits: slow(100), cost: 1 }]);
    expect(owed.ok).toBe(false);
    expect(owed.states[0]!.remaining).toBe(0);
  });
});

/** Script calls the server has run so far (EVALSHA and EVAL), from its command statistics. */
async function scriptCalls(): Promise<number> {
  const stats = await client.info("commandstats");
  let calls = 0;
  for (const match of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm))
    calls += Number(match[1]);
  return calls;
}

describe("Valkey limiter, one script call a turn", () => {
  it("decides the takes of one turn in one call, in order, and exactly", async () => {
    const limiter = new ValkeyLimiter(client);
    const a = `t${++run}:turn`;
    await limiter.take([{ id: a, limits: slow(100), cost: 0 }]); // the script is loaded
    const before = await scriptCalls();
    const decisions = await Promise.all(
      Array.from({ length: 12 }, () => limiter.take([{ id: a, limits: slow(5), cost: 1 }])),
    );
    expect(await scriptCalls()).toBe(before + 1);
    // The first five in the order asked, then refusals: each decision saw the ones before it.
    expect(decisions.map((d) => d.ok)).toEqual([
      ...Array<boolean>(5).fill(true),
      ...Array<boolean>(7).fill(false),
    ]);
    expect(decisions.slice(0, 5).map((d) => d.states[0]!.remaining)).toEqual([4, 3, 2, 1, 0]);
  });

  it("keeps each decision all-or-nothing beside the others of its turn", async () => {
    const limiter = new ValkeyLimiter(client);
    const shared = `t${++run}:shared`;
    const other = `t${run}:other`;
    const [first, second, third] = await Promise.all([
      limiter.take([{ id: other, limits: slow(1), cost: 1 }]),
      limiter.take([
        { id: shared, limits: slow(3), cost: 1 },
        { id: other, limits: slow(1), cost: 1 },
      ]),
      limiter.take([{ id: shared, limits: slow(3), cost: 3 }]),
    ]);
    expect(first.ok).toBe(true);
    // Refused on `other`, so nothing was taken from `shared`: the third finds all three units.
    expect(second.ok).toBe(false);
    expect(third.ok).toBe(true);
    expect(third.states[0]!.remaining).toBe(0);
  });

  it("sends the settlements of a turn in the same call, before its takes", async () => {
    const limiter = new ValkeyLimiter(client);
    const a = `t${++run}:settle-turn`;
    await limiter.take([{ id: a, limits: slow(100), cost: 100 }]);
    const before = await scriptCalls();
    const [, , after] = await Promise.all([
      limiter.settle(a, slow(100), -30),
      limiter.settle(a, slow(100), -20),
      limiter.take([{ id: a, limits: slow(100), cost: 50 }]),
    ]);
    expect(await scriptCalls()).toBe(before + 1);
    expect(after.ok).toBe(true);
    expect(after.states[0]!.remaining).toBe(0);
  });

  it("splits a turn of more than MAX_BATCH decisions, and fails every caller of a failed call", async () => {
    const limiter = new ValkeyLimiter(client);
    const a = `t${++run}:many`;
    const before = await scriptCalls();
    const many = await Promise.all(
      Array.from({ length: MAX_BATCH + 1 }, () =>
        limiter.take([{ id: a, limits: slow(MAX_BATCH), cost: 1 }]),
      ),
    );
    expect(await scriptCalls()).toBe(before + 2);
    expect(many.filter((d) => d.ok)).toHaveLength(MAX_BATCH);
    expect(many[MAX_BATCH]!.ok).toBe(false);

    const gone = new Redis(server.url, { lazyConnect: true, enableOfflineQueue: false });
    const broken = new ValkeyLimiter(gone);
    const outcomes = await Promise.allSettled([
      broken.take([{ id: a, limits: slow(1), cost: 1 }]),
      broken.settle(a, slow(1), 1),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected"]);
  });
});

describe("Valkey used signatures", () => {
  it("claims an id once across two clients, until it expires", async () => {
    const other = new Redis(server.url, { lazyConnect: true });
    await other.connect();
    const one = new ValkeyUsedSignatures(client);
    const two = new ValkeyUsedSignatures(other);
    const expires = Date.now() + 400;
    expect(await one.claim("sig-a", expires)).toBe(true);
    expect(await two.claim("sig-a", expires)).toBe(false);
    expect(await one.claim("sig-a", expires)).toBe(false);
    expect(await two.claim("sig-b", expires)).toBe(true);
    await new Promise((r) => setTimeout(r, 600));
    expect(await two.claim("sig-a", Date.now() + 400)).toBe(true);
    other.disconnect();
  });
});

describe.each([
  ["in-process", () => new InProcessUsedSignatures()],
  ["valkey", () => new ValkeyUsedSignatures(client)],
] as Array<[string, () => UsedSignatures]>)("%s used signatures: release", (_name, make) => {
  it("gives back a claimed id, once, to be claimed again; an unknown one is a no-op", async () => {
    const memory = make();
    const id = `rel-${++run}`;
    const expires = Date.now() + 60_000;
    expect(await memory.claim(id, expires)).toBe(true);
    await memory.release(id);
    expect(await memory.claim(id, expires)).toBe(true);
    expect(await memory.claim(id, expires)).toBe(false);
    await memory.release(`never-${run}`);
    expect(await memory.claim(id, expires)).toBe(false);
  });
});
