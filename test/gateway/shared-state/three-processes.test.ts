import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { GEN } from "../conformance/support.js";
import { startPlatform, type Platform } from "../support/platform.js";
import {
  countOf as count,
  metricOf,
  post,
  sendRequests,
  startGatewayReplica,
  type GatewayReplica as Replica,
} from "./gateway-processes.js";

/**
 * Three `modelgate gateway` processes, as three replicas of a Deployment
 * are, started with their flags and sharing one real redis-server; the
 * platform gives them their runtimes, keys file, signing secrets, payment
 * provider and usage sink. A key's limit of L requests holds across the
 * three wherever the client sends, and a payment signature is accepted by
 * one replica only; one replica SIGKILLed under load leaves the others
 * serving and the limit still shared.
 */
const L = 60;

let redis: RedisServer;
let p: Platform;
const replicas: Replica[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  p = await startPlatform({ config: { rateLimitPerMinute: 1, rateLimitBurst: L } });
  replicas.push(
    ...(await Promise.all(
      [0, 1, 2].map((index) => startGatewayReplica(p, redis, { index, burst: L, replicas: 3 })),
    )),
  );
}, 180_000);
afterAll(async () => {
  for (const replica of replicas) await replica.process.stop();
  await p?.close();
  await redis?.close();
});

/** Statuses of `count` requests with the key, 6 at a time, replica chosen by `pick`. */
const send = (key: string, n: number, pick: (i: number) => Replica) => sendRequests(key, n, pick);

async function valkeyUp(replica: Replica): Promise<string | undefined> {
  const text = await (await fetch(`${replica.opsUrl}/metrics`)).text();
  return /^modelgate_gateway_valkey_up (\d)$/m.exec(text)?.[1];
}

describe("three gateway processes sharing one redis", () => {
  it("each says it shares through Valkey", async () => {
    for (const replica of replicas) expect(await valkeyUp(replica)).toBe("1");
  });

  it("a key with a limit of L admits between 0.95 L and L across the three, however spread", async () => {
    // Round robin, then all to one replica: the same bucket either way.
    const spread = await send(p.keys.acme.key, 2 * L, (i) => replicas[i % 3]!);
    expect(count(spread, 200) + count(spread, 429)).toBe(2 * L);
    expect(count(spread, 200)).toBeGreaterThanOrEqual(Math.ceil(0.95 * L));
    expect(count(spread, 200)).toBeLessThanOrEqual(L);
    const skewed = await send(p.keys.acmeWeb.key, 2 * L, (i) => replicas[i % 5 === 0 ? 1 : 2]!);
    expect(count(skewed, 200)).toBeGreaterThanOrEqual(Math.ceil(0.95 * L));
    expect(count(skewed, 200)).toBeLessThanOrEqual(L);
    // A chunk of floor(5% × 60 / 3) = 1 unit is no lease: every decision went to Valkey.
    for (const replica of replicas) {
      expect(
        await metricOf(replica, 'modelgate_gateway_rate_limit_decisions_total{decided="leased"}'),
      ).toBe(0);
    }
    // The figures for the closing note.
    console.info(
      `three replicas, L=${L}: ${count(spread, 200)} of ${2 * L} admitted round robin, ` +
        `${count(skewed, 200)} of ${2 * L} skewed (1:4 over two replicas)`,
    );
  });

  it("a payment signature used on one replica is refused on the two others", async () => {
    const raw = JSON.stringify({ ...GEN, input: "three replicas" });
    const headers = { "pay-signature": p.sign(raw), "pay-agent-id": "agent-3" };
    const statuses = [];
    for (const replica of [replicas[1]!, replicas[0]!, replicas[2]!]) {
      const answer = await post(replica, "/pay/v1/responses", raw, headers);
      await answer.arrayBuffer();
      statuses.push(answer.status);
    }
    expect(statuses).toEqual([200, 401, 401]);
  });

  it("one replica SIGKILLed under load: the others keep answering, the limit still shared", async () => {
    const key = p.keys.limited.key; // its own limit: burst 2, one a second
    const load = send(p.keys.acme.key, 90, (i) => replicas[i % 3]!);
    await new Promise((r) => setTimeout(r, 50));
    await replicas[0]!.process.kill();
    const statuses = await load;
    // Only requests sent to the killed replica may have failed.
    expect(count(statuses, 200) + count(statuses, 429) + count(statuses, 0)).toBe(90);
    expect(count(statuses, 0)).toBeLessThanOrEqual(30);
    const survivors = [replicas[1]!, replicas[2]!];
    const limited = await send(key, 6, (i) => survivors[i % 2]!);
    // Two in the burst (perhaps a third refilled), whichever survivor answered.
    expect(count(limited, 200)).toBeGreaterThanOrEqual(2);
    expect(count(limited, 200)).toBeLessThanOrEqual(3);
    expect(count(limited, 429)).toBe(6 - count(limited, 200));
  });
});
