import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSharedState, type SharedState } from "../../../gateway/shared-state/shared-state.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";

/**
 * A gateway that starts while Valkey is down starts anyway, decides alone
 * with its share of the limits, and shares once Valkey appears.
 */
let server: RedisServer;
let state: SharedState | undefined;
beforeAll(async () => {
  server = await startRedisServer();
  await server.stop();
});
afterAll(async () => {
  await state?.close();
  await server?.close();
});

describe("starting without Valkey", () => {
  it("serves from its share at once, then shares when Valkey comes up", async () => {
    const lines: string[] = [];
    const registry = new Registry();
    const started = Date.now();
    state = await createSharedState({
      valkeyUrl: server.url,
      replicas: 4,
      defaults: { requestsPerMinute: 1, burst: 8 },
      registry,
      logger: pino({ level: "info" }, { write: (line: string) => void lines.push(line) }),
    });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(state.connection?.available).toBe(false);
    const limits = { requestsPerMinute: 1, burst: 8 };
    const take = () => state!.limiter.take([{ id: "key:k:requests", limits, cost: 1 }]);
    // A quarter of the burst of 8 while alone.
    const alone = [await take(), await take(), await take()];
    expect(alone.map((d) => d.ok)).toEqual([true, true, false]);
    expect(alone[0]!.states[0]!.limit).toBe(2);
    expect(lines.filter((line) => line.includes("valkey unreachable"))).toHaveLength(1);

    await server.start();
    const deadline = Date.now() + 10_000;
    while (!state.connection?.available) {
      if (Date.now() > deadline) throw new Error("never connected");
      await new Promise((r) => setTimeout(r, 50));
    }
    const shared = await take();
    expect(shared.ok).toBe(true);
    expect(shared.states[0]).toMatchObject({ limit: 8, remaining: 7 });
    expect(await registry.getSingleMetricAsString("modelgate_gateway_valkey_up")).toMatch(/ 1$/m);
    expect(lines.some((line) => line.includes("valkey connected"))).toBe(true);
  });
});
