import { Redis } from "iovalkey";
import { pino } from "pino";
import { Counter, Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BucketTake } from "../../../gateway/rate-limit/limiter.js";
import {
  LeasedLimiter,
  leaseChunk,
  type LeasedLimiterOptions,
} from "../../../gateway/shared-state/leased-limiter.js";
import { createSharedState } from "../../../gateway/shared-state/shared-state.js";
import {
  RATE_LIMIT_KEY_PREFIX,
  ValkeyLimiter,
} from "../../../gateway/shared-state/valkey-limiter.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";

/**
 * The leased limiter on a real redis-server: a replica takes a chunk of a
 * bucket ahead with a shared take and spends it without asking Valkey; the
 * shared bucket's balance (read with a plain Valkey limiter) shows what was
 * taken. Rates are a unit a minute so nothing refills mid-test.
 */
let server: RedisServer;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await server?.close();
});

async function client(): Promise<Redis> {
  const made = new Redis(server.url, { lazyConnect: true });
  await made.connect();
  clients.push(made);
  return made;
}

const slow = (burst: number) => ({ requestsPerMinute: 1, burst });
let run = 0;
const fresh = (name: string) => `lease${++run}:${name}`;

async function scriptCalls(): Promise<number> {
  const stats = await (await client()).info("commandstats");
  let calls = 0;
  for (const match of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm))
    calls += Number(match[1]);
  return calls;
}

/** A leased limiter on its own connection, as one replica has, and its decision counter. */
async function replica(options: Partial<LeasedLimiterOptions> & { replicas: number }) {
  const decisions = new Counter({
    name: "decisions",
    help: "test",
    labelNames: ["decided"],
    registers: [new Registry()],
  });
  const limiter = new LeasedLimiter({
    shared: new ValkeyLimiter(await client()),
    decisions,
    ...options,
  });
  const counted = async (decided: string) =>
    (await decisions.get()).values.find((v) => v.labels.decided === decided)?.value ?? 0;
  return { limiter, counted };
}

/** The shared bucket's whole units left, read without taking. */
async function sharedLeft(id: string, burst: number): Promise<number> {
  const reader = new ValkeyLimiter(await client());
  const read = await reader.take([{ id, limits: slow(burst), cost: 0 }]);
  return read.states[0]!.remaining;
}

describe("leased limiter", () => {
  it("the chunk is 5% of the burst split over the replicas, whole units", () => {
    expect(leaseChunk(slow(60), 3)).toBe(1);
    expect(leaseChunk(slow(600), 3)).toBe(10);
    expect(leaseChunk(slow(1_000_000), 1)).toBe(50_000);
    expect(leaseChunk(slow(19), 1)).toBe(0);
  });

  it("with a chunk of 1 or less, every take goes to Valkey and leases nothing, headers exact", async () => {
    const { limiter, counted } = await replica({ replicas: 3 });
    const id = fresh("small");
    const before = await scriptCalls();
    for (let i = 1; i <= 3; i++) {
      const decision = await limiter.take([{ id, limits: slow(60), cost: 1 }]);
      expect(decision.ok).toBe(true);
      expect(decision.states[0]).toMatchObject({ limit: 60, remaining: 60 - i });
    }
    expect(await scriptCalls()).toBe(before + 3);
    expect(limiter.heldUnits).toBe(0);
    expect(await counted("shared")).toBe(3);
    expect(await counted("leased")).toBe(0);
  });

  it("takes a chunk with the first shared take, then decides from it without Valkey", async () => {
    const { limiter, counted } = await replica({ replicas: 1 });
    const id = fresh("chunk");
    const take: BucketTake = { id, limits: slow(1000), cost: 1 };
    const before = await scriptCalls();
    const first = await limiter.take([take]);
    // The shared bucket gave 1 and leased 50: 949 there, and the headers count the lease.
    expect(first).toEqual({ ok: true, states: [{ limit: 1000, remaining: 999, resetMs: 60_000 }] });
    expect(limiter.heldUnits).toBe(50);
    for (let i = 0; i < 50; i++) expect((await limiter.take([take])).ok).toBe(true);
    expect(await scriptCalls()).toBe(before + 1);
    expect(limiter.heldUnits).toBe(0);
    expect(await sharedLeft(id, 1000)).toBe(949);
    expect(await counted("leased")).toBe(50);
    // The lease is spent: the next take asks Valkey again and leases another chunk.
    const again = await limiter.take([take]);
    expect(again.states[0]!.remaining).toBe(948);
    expect(await sharedLeft(id, 1000)).toBe(898);
    expect(await counted("shared")).toBe(2);
  });

  it("takes of one turn on a bucket without a lease ask for one chunk between them", async () => {
    const { limiter } = await replica({ replicas: 1 });
    const id = fresh("turn");
    const before = await scriptCalls();
    const decisions = await Promise.all(
      Array.from({ length: 20 }, () => limiter.take([{ id, limits: slow(1000), cost: 1 }])),
    );
    expect(decisions.every((d) => d.ok)).toBe(true);
    expect(await scriptCalls()).toBe(before + 1);
    expect(limiter.heldUnits).toBe(50);
    expect(await sharedLeft(id, 1000)).toBe(1000 - 20 - 50);
  });

  it("a read while the first lease is being asked for goes to Valkey, not to the empty lease", async () => {
    const { limiter } = await replica({ replicas: 1 });
    const id = fresh("read");
    const before = await scriptCalls();
    const [take, read] = await Promise.all([
      limiter.take([{ id, limits: slow(1000), cost: 1 }]),
      limiter.take([{ id, limits: slow(1000), cost: 0 }]),
    ]);
    expect(await scriptCalls()).toBe(before + 1);
    expect(take.states[0]!.remaining).toBe(999);
    // 949 in Valkey and 50 leased here, not a full bucket.
    expect(read.states[0]!.remaining).toBe(999);
  });

  it("leases only from what is left after the cost, and nothing with a refusal", async () => {
    const { limiter } = await replica({ replicas: 1 });
    const id = fresh("short");
    const plain = new ValkeyLimiter(await client());
    expect((await plain.take([{ id, limits: slow(100), cost: 97 }])).ok).toBe(true);
    const refused = await limiter.take([{ id, limits: slow(100), cost: 5 }]);
    expect(refused.ok).toBe(false);
    expect(refused.ok ? 0 : refused.retryAfterSeconds).toBeGreaterThan(60);
    expect(limiter.heldUnits).toBe(0);
    const fits = await limiter.take([{ id, limits: slow(100), cost: 1 }]);
    expect(fits.ok).toBe(true);
    expect(fits.states[0]).toMatchObject({ limit: 100, remaining: 2 });
    expect(fits.states[0]!.resetMs).toBeGreaterThan(97 * 60_000);
    expect(fits.states[0]!.resetMs).toBeLessThanOrEqual(98 * 60_000);
    expect(limiter.heldUnits).toBe(2); // the chunk is 5; two were left
    expect(await sharedLeft(id, 100)).toBe(0);
  });

  it("takes every bucket or none: one bucket without room refuses the take, the other's lease untouched", async () => {
    const { limiter } = await replica({ replicas: 1 });
    const [a, b] = [fresh("a"), fresh("b")];
    await limiter.take([{ id: a, limits: slow(200), cost: 1 }]); // a holds a lease of 10
    const plain = new ValkeyLimiter(await client());
    await plain.take([{ id: b, limits: slow(200), cost: 150 }]);
    const refused = await limiter.take([
      { id: a, limits: slow(200), cost: 1 },
      { id: b, limits: slow(200), cost: 100 },
    ]);
    expect(refused.ok).toBe(false);
    expect(limiter.heldUnits).toBe(10);
    expect(await sharedLeft(a, 200)).toBe(189);
    expect(await sharedLeft(b, 200)).toBe(50);
  });

  it("three replicas on one bucket admit between 0.95 L and L however the takes spread, and the rest sits in their leases", async () => {
    const L = 600;
    const three = await Promise.all([0, 1, 2].map(() => replica({ replicas: 3 })));
    const id = fresh("three");
    let admitted = 0;
    let refused = 0;
    // Skewed: half to the first replica, the rest split; 8 at a time.
    const pick = (i: number) => three[i % 4 < 2 ? 0 : (i % 4) - 1]!.limiter;
    for (let wave = 0; wave < (2 * L) / 8; wave++) {
      const decisions = await Promise.all(
        Array.from({ length: 8 }, (_, j) =>
          pick(wave * 8 + j).take([{ id, limits: slow(L), cost: 1 }]),
        ),
      );
      admitted += decisions.filter((d) => d.ok).length;
      refused += decisions.filter((d) => !d.ok).length;
    }
    const held = three.reduce((sum, r) => sum + r.limiter.heldUnits, 0);
    expect(admitted + refused).toBe(2 * L);
    expect(admitted).toBeLessThanOrEqual(L);
    expect(admitted).toBeGreaterThanOrEqual(Math.ceil(0.95 * L));
    expect(held).toBeLessThanOrEqual(3 * leaseChunk(slow(L), 3));
    // Every unit is admitted, held in a lease, or (a unit a minute refills) still shared.
    expect(admitted + held + (await sharedLeft(id, L))).toBeGreaterThanOrEqual(L - 1);
    expect(admitted + held + (await sharedLeft(id, L))).toBeLessThanOrEqual(L + 1);
  });

  it("settlements go into a held lease up to its chunk, the rest to Valkey", async () => {
    const { limiter } = await replica({ replicas: 1 });
    const id = fresh("settle");
    const limits = slow(10_000); // chunk 500
    await limiter.take([{ id, limits, cost: 400 }]); // shared: 400 taken, 500 leased
    await limiter.take([{ id, limits, cost: 400 }]); // from the lease: 100 left
    expect(limiter.heldUnits).toBe(100);
    const before = await scriptCalls();
    await limiter.settle(id, limits, -350); // used 50 of 400
    expect(limiter.heldUnits).toBe(450);
    await limiter.settle(id, limits, 100); // a debt the lease covers
    expect(limiter.heldUnits).toBe(350);
    expect(await scriptCalls()).toBe(before);
    await limiter.settle(id, limits, -400); // 150 fill the lease, 250 go back
    expect(limiter.heldUnits).toBe(500);
    expect(await scriptCalls()).toBe(before + 1);
    expect(await sharedLeft(id, 10_000)).toBe(10_000 - 400 - 500 + 250);
    await limiter.settle(id, limits, 700); // more than the lease: Valkey's debt
    expect(limiter.heldUnits).toBe(500);
    expect(await sharedLeft(id, 10_000)).toBe(10_000 - 400 - 500 + 250 - 700);
  });

  it("a lease unused for its idle time goes back to Valkey; every lease goes back at close, in one call", async () => {
    const { limiter } = await replica({ replicas: 1, idleMs: 100 });
    const idle = fresh("idle");
    await limiter.take([{ id: idle, limits: slow(1000), cost: 1 }]);
    expect(await sharedLeft(idle, 1000)).toBe(949);
    await new Promise((r) => setTimeout(r, 300));
    expect(limiter.heldUnits).toBe(0);
    expect(await sharedLeft(idle, 1000)).toBe(999);

    const [a, b] = [fresh("close-a"), fresh("close-b")];
    await limiter.take([{ id: a, limits: slow(1000), cost: 1 }]);
    await limiter.take([{ id: b, limits: slow(400), cost: 3 }]);
    expect(limiter.heldUnits).toBe(50 + 20);
    const before = await scriptCalls();
    await limiter.close();
    expect(await scriptCalls()).toBe(before + 1);
    expect(limiter.heldUnits).toBe(0);
    expect(await sharedLeft(a, 1000)).toBe(999);
    expect(await sharedLeft(b, 400)).toBe(397);
  });

  it("drop forgets the leases: their units are lost to the bucket, not admitted twice", async () => {
    const { limiter } = await replica({ replicas: 1 });
    const id = fresh("drop");
    await limiter.take([{ id, limits: slow(1000), cost: 1 }]);
    limiter.drop();
    expect(limiter.heldUnits).toBe(0);
    const next = await limiter.take([{ id, limits: slow(1000), cost: 1 }]);
    expect(next.ok).toBe(true);
    expect(await sharedLeft(id, 1000)).toBe(1000 - 1 - 50 - 1 - 50);
  });

  it("a failed shared take rejects and leaves no lease asked for", async () => {
    const gone = new Redis(server.url, { lazyConnect: true, enableOfflineQueue: false });
    gone.on("error", () => {});
    clients.push(gone);
    const decisions = new Counter({ name: "d", help: "t", labelNames: ["decided"], registers: [] });
    const limiter = new LeasedLimiter({
      shared: new ValkeyLimiter(gone),
      replicas: 1,
      decisions,
    });
    const id = fresh("failed");
    await expect(limiter.take([{ id, limits: slow(1000), cost: 1 }])).rejects.toThrow();
    if (gone.status !== "ready") await new Promise((r) => gone.once("ready", r));
    // The chunk is asked for again in full: nothing stayed pending.
    expect((await limiter.take([{ id, limits: slow(1000), cost: 1 }])).ok).toBe(true);
    expect(limiter.heldUnits).toBe(50);
  });
});

describe("leases in the shared state as the gateway wires it", () => {
  it("Valkey gone: the leases are dropped for the fallback; back: leased anew; closed: given back", async () => {
    const own = await startRedisServer();
    const registry = new Registry();
    const state = await createSharedState({
      valkeyUrl: own.url,
      replicas: 1,
      defaults: slow(60),
      registry,
      logger: pino({ level: "silent" }),
    });
    const reader = new Redis(own.url, { lazyConnect: true, enableOfflineQueue: false });
    reader.on("error", () => {});
    const sample = async (name: string, labels: Record<string, string> = {}) => {
      const found = await registry.getSingleMetric(name)?.get();
      const value = found?.values.find((v) =>
        Object.entries(labels).every(([k, l]) => v.labels[k] === l),
      );
      return value?.value ?? 0;
    };
    const until = async (condition: () => boolean) => {
      const deadline = Date.now() + 10_000;
      while (!condition()) {
        if (Date.now() > deadline) throw new Error("condition not met in time");
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const take = { id: "wired", limits: slow(1000), cost: 1 };
    try {
      expect((await state.limiter.take([take])).ok).toBe(true);
      expect((await state.limiter.take([take])).ok).toBe(true);
      expect(await sample("modelgate_gateway_rate_limit_leased_units")).toBe(49);
      expect(
        await sample("modelgate_gateway_rate_limit_decisions_total", { decided: "leased" }),
      ).toBe(1);

      await own.stop();
      await until(() => state.connection?.available === false);
      expect((await state.limiter.take([take])).ok).toBe(true);
      expect(await sample("modelgate_gateway_valkey_fallbacks_total")).toBe(1);
      expect(await sample("modelgate_gateway_rate_limit_leased_units")).toBe(0);

      await own.start(); // empty: the bucket starts full again
      await until(() => state.connection?.available === true);
      const back = await state.limiter.take([take]);
      expect(back.ok).toBe(true);
      expect(await sample("modelgate_gateway_rate_limit_leased_units")).toBe(50);
      await reader.connect();
      const held = async () =>
        Math.floor(Number(await reader.hget(`${RATE_LIMIT_KEY_PREFIX}wired`, "v")));
      expect(await held()).toBe(1000 - 1 - 50);
      await state.close();
      expect(await held()).toBe(1000 - 1);
    } finally {
      reader.disconnect();
      await state.close();
      await own.close();
    }
  });
});
