import { dirname, join } from "node:path";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway } from "../../../gateway/app.js";
import { createGatewayComponents, type GatewayComponents } from "../../../gateway/components.js";
import { gatewayConfigSchema } from "../../../gateway/config.js";
import { gatewayLoggerOptions } from "../../../gateway/logging.js";
import { FileSource } from "../../../gateway/registry/file-source.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { GEN } from "../conformance/support.js";
import { countOf as count, post, sendRequests as send } from "./gateway-processes.js";

/**
 * Two gateway replicas in one process, sharing one real redis-server (and
 * the platform's runtimes, keys, secrets and payment provider): the limits
 * and the used signatures hold across them, and when redis goes away under
 * load they keep serving on their own share, then share again once it is
 * back. The API key's default limit is L requests with a negligible refill
 * (one a minute), so a count of 200s is the limit at work.
 */
const L = 40;

interface Replica {
  url: string;
  components: GatewayComponents;
  logLines: string[];
  close(): Promise<void>;
}

let redis: RedisServer;
let p: Platform;
let replicas: Replica[];

/** A second gateway on the platform's files, with a state folder of its own. */
async function startReplica(platform: Platform, valkeyUrl: string): Promise<Replica> {
  const dir = dirname(platform.stateDir);
  const config = gatewayConfigSchema.parse({
    keysFile: join(dir, "keys.yaml"),
    stateDir: join(dir, "state-2"),
    usageSinkUrl: platform.sink.url,
    payProviderUrl: platform.provider.url,
    payProviderCredentialFile: join(dir, "provider-credential"),
    paySigningSecretsFile: join(dir, "secrets.yaml"),
    rateLimitPerMinute: 1,
    rateLimitBurst: L,
    valkeyUrl,
    replicas: 2,
  });
  const logLines: string[] = [];
  const logger = pino(gatewayLoggerOptions("info"), {
    write: (line: string) => void logLines.push(line),
  });
  const components = await createGatewayComponents(config, logger);
  const files = new FileSource({ dir, registry: components.deps.registry, logger });
  await files.start();
  const gateway: FastifyInstance = buildGateway(components.deps);
  const url = await gateway.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    components,
    logLines,
    async close() {
      files.stop();
      await gateway.close();
      await components.close();
    },
  };
}

beforeAll(async () => {
  redis = await startRedisServer();
  p = await startPlatform({
    config: { rateLimitPerMinute: 1, rateLimitBurst: L, valkeyUrl: redis.url, replicas: 2 },
  });
  replicas = [
    { url: p.url, components: p.components, logLines: p.logLines, close: () => p.close() },
    await startReplica(p, redis.url),
  ];
});
afterAll(async () => {
  await replicas?.[1]?.close();
  await p?.close();
  await redis?.close();
});

async function metric(replica: Replica, name: string): Promise<number> {
  const found = await replica.components.deps.metrics.registry.getSingleMetric(name)?.get();
  return (found?.values ?? []).reduce((sum, v) => sum + v.value, 0);
}

async function until(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("two gateway replicas sharing one redis", () => {
  it("a key with a limit of L admits between 0.95 L and L across both, whichever it is sent to", async () => {
    expect(await metric(replicas[0]!, "modelgate_gateway_valkey_up")).toBe(1);
    expect(await metric(replicas[1]!, "modelgate_gateway_valkey_up")).toBe(1);
    // Spread unevenly (2 of 3 to the second replica), 8 at a time.
    const statuses = await send(p.keys.acme.key, 2 * L, (i) => replicas[i % 3 === 0 ? 0 : 1]!);
    expect(count(statuses, 200) + count(statuses, 429)).toBe(2 * L);
    expect(count(statuses, 200)).toBeGreaterThanOrEqual(Math.ceil(0.95 * L));
    expect(count(statuses, 200)).toBeLessThanOrEqual(L);
  });

  it("the 200s and 429s of both carry the shared bucket's headers", async () => {
    const key = p.keys.acmeWeb.key;
    const first = await post(replicas[0]!, "/v1/responses", JSON.stringify(GEN), {
      "x-api-key": key,
    });
    const second = await post(replicas[1]!, "/v1/responses", JSON.stringify(GEN), {
      "x-api-key": key,
    });
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(first.headers.get("x-ratelimit-limit-requests")).toBe(String(L));
    expect(first.headers.get("x-ratelimit-remaining-requests")).toBe(String(L - 1));
    // The second replica took from the same bucket.
    expect(second.headers.get("x-ratelimit-remaining-requests")).toBe(String(L - 2));
  });

  it("a payment signature used on one replica is refused on the other", async () => {
    const raw = JSON.stringify(GEN);
    const signature = p.sign(raw);
    const headers = { "pay-signature": signature, "pay-agent-id": "agent-r" };
    const first = await post(replicas[0]!, "/pay/v1/responses", raw, headers);
    expect(first.status).toBe(200);
    const replay = await post(replicas[1]!, "/pay/v1/responses", raw, headers);
    expect(replay.status).toBe(401);
    await replay.arrayBuffer();
    // The 401 of a replay looks like a forgery's; the counter tells them apart.
    expect(await metric(replicas[1]!, "modelgate_gateway_pay_replays_total")).toBe(1);
    const fresh = await post(replicas[1]!, "/pay/v1/responses", raw, {
      ...headers,
      "pay-signature": p.sign(raw),
    });
    expect(fresh.status).toBe(200);
  });

  it("redis stopped under load: both keep serving on their share, metric and one log line; restarted: shared again", async () => {
    // Load with the key the headers test barely used.
    const load = send(p.keys.acmeWeb.key, 2 * L, (i) => replicas[i % 2]!, 4);
    let loadDone = false;
    void load.then(() => (loadDone = true));
    await new Promise((r) => setTimeout(r, 30));
    await redis.stop();
    expect(loadDone).toBe(false);
    const during = await load;
    // Nothing failed: every answer was a 200 or a 429, shared or local.
    expect(count(during, 200) + count(during, 429)).toBe(2 * L);
    await until(async () => (await metric(replicas[0]!, "modelgate_gateway_valkey_up")) === 0);
    await until(async () => (await metric(replicas[1]!, "modelgate_gateway_valkey_up")) === 0);

    // Down: each replica holds half of L for a fresh key, so one replica alone admits L/2.
    const fresh = p.keys.acme.key;
    const alone = await send(fresh, L, () => replicas[0]!, 4);
    expect(count(alone, 200)).toBe(L / 2);
    expect(await metric(replicas[0]!, "modelgate_gateway_valkey_fallbacks_total")).toBeGreaterThan(
      0,
    );
    const outageLines = (r: Replica) =>
      r.logLines.filter((line) => line.includes("valkey unreachable")).length;
    expect(outageLines(replicas[0]!)).toBe(1);
    expect(outageLines(replicas[1]!)).toBe(1);

    // Replays are refused from this replica's memory while redis is away.
    const raw = JSON.stringify({ ...GEN, input: "during the outage" });
    const signed = { "pay-signature": p.sign(raw), "pay-agent-id": "agent-o" };
    expect((await post(replicas[0]!, "/pay/v1/responses", raw, signed)).status).toBe(200);
    expect((await post(replicas[0]!, "/pay/v1/responses", raw, signed)).status).toBe(401);

    await redis.start();
    await until(async () => (await metric(replicas[0]!, "modelgate_gateway_valkey_up")) === 1);
    await until(async () => (await metric(replicas[1]!, "modelgate_gateway_valkey_up")) === 1);
    expect(replicas[0]!.logLines.some((line) => line.includes("valkey is back"))).toBe(true);
    // Redis never saw that signature; the replica that accepted it still refuses it.
    expect((await post(replicas[0]!, "/pay/v1/responses", raw, signed)).status).toBe(401);
    // Shared again (redis restarted empty): one replica alone admits the whole L.
    const back = await send(fresh, 2 * L, () => replicas[0]!, 4);
    expect(count(back, 200)).toBe(L);
  });

  it("redis stuck (SIGSTOP): answers do not wait on it beyond one command timeout a second; resumed: shared again", async () => {
    redis.pause();
    try {
      const slow: number[] = [];
      const started = Date.now();
      for (let i = 0; i < 30; i++) {
        const t0 = performance.now();
        const answer = await post(replicas[0]!, "/v1/responses", JSON.stringify(GEN), {
          "x-api-key": p.keys.acme.key,
        });
        await answer.arrayBuffer();
        expect([200, 429]).toContain(answer.status);
        if (performance.now() - t0 >= 200) slow.push(i);
      }
      // One request per second of suspension pays the 250 ms timeout; the rest decide at once.
      expect(slow.length).toBeGreaterThanOrEqual(1);
      expect(slow.length).toBeLessThanOrEqual(1 + Math.ceil((Date.now() - started) / 1000));
      expect(await metric(replicas[0]!, "modelgate_gateway_valkey_up")).toBe(0);
    } finally {
      redis.resume();
    }
    await until(async () => {
      // A request after the suspension tries redis again, and shares once it answers.
      const answer = await post(replicas[0]!, "/v1/responses", JSON.stringify(GEN), {
        "x-api-key": p.keys.acme.key,
      });
      await answer.arrayBuffer();
      return (await metric(replicas[0]!, "modelgate_gateway_valkey_up")) === 1;
    });
  });

  it("redis stuck, eight requests at a time: one probe a second pays the timeout, not each in flight; resumed: shared again with no traffic", async () => {
    redis.pause();
    let slow = 0;
    let sent = 0;
    const started = Date.now();
    try {
      const client = async () => {
        while (Date.now() - started < 4_000) {
          const sentAt = Date.now();
          const t0 = performance.now();
          const answer = await post(replicas[0]!, "/v1/responses", JSON.stringify(GEN), {
            "x-api-key": p.keys.acme.key,
          });
          await answer.arrayBuffer();
          expect([200, 429]).toContain(answer.status);
          sent++;
          // Those in flight when it stopped wait out the timeout: counted from the second after.
          if (performance.now() - t0 >= 200 && sentAt - started >= 1_000) slow++;
        }
      };
      await Promise.all(Array.from({ length: 8 }, client));
      // One probe a second pays the timeout. Before, every request in flight
      // when a suspension ran out tried redis: about eight a second.
      expect(sent).toBeGreaterThan(24);
      expect(slow).toBeLessThanOrEqual(1 + Math.ceil((Date.now() - started - 1_000) / 1000));
    } finally {
      redis.resume();
    }
    // No request comes: the connection's own probe finds redis answering.
    await until(async () => (await metric(replicas[0]!, "modelgate_gateway_valkey_up")) === 1);
  });
});
