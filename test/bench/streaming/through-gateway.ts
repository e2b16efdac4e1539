import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Agent } from "undici";
import { fixtureFolder } from "../../runtime/support/runtime-server.js";
import { startRuntimeProcess } from "../runtime/runtime-process.js";
import type { Child } from "../gateway/child-process.js";
import { pinning } from "../gateway/cpu-affinity.js";
import { writeGatewayFiles } from "../gateway/gateway-files.js";
import { startGateway } from "../gateway/processes.js";

/**
 * Section (b) of the streaming benchmark: time to the first
 * `response.output_text.delta` through the gateway against the same stream
 * from the runtime directly. As in bench:gateway, the runtime (tiny-gpt) and
 * the gateway (wired as `modelgate gateway` wires it, request logs on at
 * info) are child processes and the clients are this one, so the clients
 * never share an event loop with what they measure. Two layouts: all
 * processes sharing the cores (informative on a two-core machine, where the
 * gateway's work competes with the runtime's), and pinned, with the gateway
 * alone on core 0 and the runtime and the clients on core 1, as pods with
 * their own CPU are deployed (the target applies there).
 *
 * Each round sends one batch of N concurrent streams directly and one through
 * the gateway, alternating which side goes first; a side's p50 is taken over
 * every first token it measured, and the per-round difference of p50s is
 * reported as the spread. Beside it, the gateway's CPU time per stream (from
 * /proc, all its threads, the whole stream: relay, billing, storing): the
 * part of its cost that the load of a shared machine does not blur.
 */
export interface GatewayStreamingOptions {
  rounds: number;
  clients: readonly number[];
  /** `store: false` on every request (`--no-store`): the relay without the stored response's write. */
  store: boolean;
}

export type Row = [string, string, string];

const MODEL = "tiny-gpt";
const bodyOf = (store: boolean) =>
  JSON.stringify({
    model: MODEL,
    input: "Hello",
    temperature: 0,
    max_output_tokens: 8,
    stream: true,
    ...(store ? {} : { store: false }),
  });

/** The bench's InferenceModel: a text-generation model whose endpoint is the runtime child. */
function modelYaml(runtimeUrl: string): string {
  return [
    "apiVersion: serving.modelgate.dev/v1alpha1",
    "kind: InferenceModel",
    "metadata:",
    `  name: ${MODEL}`,
    "spec:",
    "  task: text-generation",
    "  source: { uri: file:///models/x }",
    `  pricing: { serviceSlug: ${MODEL} }`,
    "status:",
    `  endpoint: ${runtimeUrl}`,
    "",
  ].join("\n");
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
};
const spread = (values: number[]) =>
  `[${Math.min(...values).toFixed(2)}, ${Math.max(...values).toFixed(2)}]`;

/** Milliseconds from sending the request to the first chunk holding a delta; reads to the end. */
async function firstDeltaMs(
  agent: Agent,
  origin: string,
  headers: Record<string, string>,
  body: string,
): Promise<number> {
  const started = performance.now();
  const response = await agent.request({
    origin,
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  if (response.statusCode !== 200) {
    throw new Error(`${origin}: ${response.statusCode} ${await response.body.text()}`);
  }
  let first = NaN;
  // Only the last chunk's tail can hold the start of a split event name.
  let tail = "";
  for await (const chunk of response.body as AsyncIterable<Buffer>) {
    if (!Number.isNaN(first)) continue;
    const text = tail + chunk.toString("latin1");
    if (text.includes("output_text.delta")) first = performance.now() - started;
    tail = text.slice(-32);
  }
  if (Number.isNaN(first)) throw new Error(`${origin}: a stream with no delta`);
  return first;
}

interface Measured {
  direct: number[];
  through: number[];
  perRound: number[];
  /** The gateway's CPU seconds (all threads) over the through batches, per stream. */
  gatewayCpuPerStream: number;
}

async function measure(
  agent: Agent,
  direct: string,
  gateway: Child,
  apiKey: string,
  clients: number,
  rounds: number,
  body: string,
): Promise<Measured> {
  const result = { direct: [] as number[], through: [] as number[], perRound: [] as number[] };
  let gatewayCpu = 0;
  const batch = (origin: string, headers: Record<string, string>) =>
    Promise.all(Array.from({ length: clients }, () => firstDeltaMs(agent, origin, headers, body)));
  const throughBatch = async () => {
    const before = await gateway.cpuSeconds();
    const firsts = await batch(gateway.url, { "x-api-key": apiKey });
    gatewayCpu += (await gateway.cpuSeconds()) - before;
    return firsts;
  };
  for (let i = 0; i < rounds; i++) {
    let d: number[];
    let t: number[];
    if (i % 2 === 0) {
      d = await batch(direct, {});
      t = await throughBatch();
    } else {
      t = await throughBatch();
      d = await batch(direct, {});
    }
    result.direct.push(...d);
    result.through.push(...t);
    result.perRound.push(median(t) - median(d));
  }
  return { ...result, gatewayCpuPerStream: gatewayCpu / (rounds * clients) };
}

export async function gatewayStreamingSection(options: GatewayStreamingOptions): Promise<Row[]> {
  const rows: Row[] = [];
  const body = bodyOf(options.store);
  const maxClients = Math.max(...options.clients);
  const runtime = await startRuntimeProcess({
    path: await fixtureFolder(MODEL),
    modelId: MODEL,
    threads: 1,
    // Every client's sequence in the running batch; no prefix cache, so that every prefill is alike.
    throughput: { generationConcurrency: maxClients, prefixCacheBytes: 0 },
  });
  const setup = await writeGatewayFiles({
    model: MODEL,
    runtimeUrl: runtime.url,
    sinkUrl: null,
    providerUrl: null,
    logLevel: "info",
  });
  await writeFile(join(setup.flags.modelsDir!, `${MODEL}.yaml`), modelYaml(runtime.url));
  let gateway: Child | null = null;
  const agent = new Agent({ connections: maxClients * 2, keepAliveTimeout: 30_000 });
  try {
    gateway = await startGateway(setup, null);
    const run = async (layout: string) => {
      // Warm: JIT, connections on both sides, the ledger's first writes.
      await measure(agent, runtime.url, gateway!, setup.apiKey, maxClients, 4, body);
      for (const clients of options.clients) {
        const m = await measure(
          agent,
          runtime.url,
          gateway!,
          setup.apiKey,
          clients,
          options.rounds * (clients === 1 ? 6 : 2),
          body,
        );
        const added = median(m.through) - median(m.direct);
        const verdict = layout === "pinned" ? (added < 1 ? " PASS" : " MISS") : "";
        rows.push([
          `gateway ${layout}${options.store ? "" : " store:false"}, ${clients} client(s): first token`,
          `direct ${median(m.direct).toFixed(2)} ms, through ${median(m.through).toFixed(2)} ms; gateway CPU ${(m.gatewayCpuPerStream * 1000).toFixed(2)} ms per whole stream`,
          `+${added.toFixed(2)} ms (per round ${spread(m.perRound)})${verdict}${layout === "pinned" ? " (< 1 ms at p50)" : " (informative)"}`,
        ]);
      }
    };
    await run("shared");
    const pin = pinning();
    if (pin) {
      try {
        pin.pin(gateway.pid, "0");
        pin.pin(runtime.pid, "1");
        pin.pin(process.pid, "1");
        await run("pinned");
      } finally {
        for (const pid of [gateway.pid, runtime.pid, process.pid]) pin.pin(pid, pin.original);
      }
    } else {
      rows.push(["gateway pinned", "not run: no taskset or fewer than two cores", ""]);
    }
  } finally {
    await agent.close();
    await gateway?.stop();
    await runtime.stop();
    await rm(setup.dir, { recursive: true, force: true });
  }
  return rows;
}
