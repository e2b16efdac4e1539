import { dirname, join } from "node:path";
import { freePort } from "../../support/free-port.js";
import type { RedisServer } from "../../support/redis-server.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { GEN } from "../conformance/support.js";
import type { Platform } from "../support/platform.js";

/**
 * `modelgate gateway` processes as replicas of a Deployment run them, with
 * their flags, on one platform (runtimes, keys file, signing secrets,
 * payment provider, usage sink) and one real redis-server; the key's
 * default limit is `burst` requests refilling at one a minute.
 */
export interface GatewayReplica {
  url: string;
  opsUrl: string;
  process: ServiceProcess;
}

export async function startGatewayReplica(
  p: Platform,
  redis: RedisServer,
  options: { index: number; burst: number; replicas: number },
): Promise<GatewayReplica> {
  const dir = dirname(p.stateDir);
  const [port, metricsPort] = [await freePort(), await freePort()];
  const process = await startServiceProcess({
    args: [
      "gateway",
      "--registry=file",
      `--models-dir=${dir}`,
      `--keys-file=${join(dir, "keys.yaml")}`,
      `--state-dir=${join(dir, `replica-${options.index}`)}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      `--usage-sink-url=${p.sink.url}`,
      `--pay-provider-url=${p.provider.url}`,
      `--pay-provider-credential-file=${join(dir, "provider-credential")}`,
      `--pay-signing-secrets-file=${join(dir, "secrets.yaml")}`,
      "--rate-limit-per-minute=1",
      `--rate-limit-burst=${options.burst}`,
      `--valkey-url=${redis.url}`,
      `--replicas=${options.replicas}`,
      "--log-level=warn",
    ],
    readyUrl: `http://127.0.0.1:${metricsPort}/readyz`,
  });
  return {
    url: `http://127.0.0.1:${port}`,
    opsUrl: `http://127.0.0.1:${metricsPort}`,
    process,
  };
}

/** Anything serving the gateway's routes: a replica process, or a gateway in this process. */
export interface GatewayAt {
  url: string;
}

export function post(
  replica: GatewayAt,
  path: string,
  body: string,
  headers: Record<string, string>,
) {
  return fetch(`${replica.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
}

/** Statuses of `count` requests with the key, `concurrency` at a time, replica chosen by `pick`; 0 for a dropped connection. */
export async function sendRequests(
  key: string,
  count: number,
  pick: (i: number) => GatewayAt,
  concurrency = 6,
): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      try {
        const answer = await post(pick(i), "/v1/responses", JSON.stringify(GEN), {
          "x-api-key": key,
        });
        await answer.arrayBuffer();
        statuses.push(answer.status);
      } catch {
        statuses.push(0); // the connection died with a killed replica
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return statuses;
}

export const countOf = (statuses: number[], status: number) =>
  statuses.filter((s) => s === status).length;

/** A metric on the replica's ops port, summed over the samples that start with `prefix` (a name, then labels if wanted). */
export async function metricOf(replica: GatewayReplica, prefix: string): Promise<number> {
  const text = await (await fetch(`${replica.opsUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(prefix)) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}
