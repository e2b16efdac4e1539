import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { PII_SENTENCES } from "../../runtime/real-models/pii-sentences.js";
import { runClosedLoop, type LoadResult } from "../runtime/http-load.js";
import {
  startRuntimeProcess,
  startServerProcess,
  type Memory,
  type RuntimeProcess,
} from "../runtime/runtime-process.js";
import { fmt } from "../runtime/stats.js";
import type { ExtractPlan } from "./plan.js";
import type { PeerConfig } from "./peer-server.js";

/**
 * Entity extraction requests per second over HTTP: our runtime with
 * batching on and off, and the peer, each in a process of its own, all
 * started first and idle while another is measured. For each client count,
 * every round measures the three once, in an order that rotates from round
 * to round, so that machine drift lands on every side of a ratio.
 */
export const ENGINES = ["on", "off", "peer"] as const;
export type Engine = (typeof ENGINES)[number];

export interface ExtractPoint {
  engine: Engine;
  clients: number;
  round: number;
  result: LoadResult;
  /** CPU seconds the server process used during the point. */
  serverCpuSeconds: number;
}

export interface EngineMemory {
  engine: Engine;
  /** Loaded, warmed and idle, before any point. */
  idle: Memory;
  /** After the last point: `peakMb` is the process's high-water mark. */
  after: Memory;
}

/** One entity as both sides report it, for the check that they answer alike. */
interface Span {
  label: string;
  start: number;
  end: number;
}

export interface ExtractFigures {
  points: ExtractPoint[];
  memory: EngineMemory[];
  /** Sentences on which our runtime and the peer return the same entities at the threshold. */
  sameEntities: number;
  sentences: number;
}

const PEER_SCRIPT = fileURLToPath(new URL("./peer-server.ts", import.meta.url));

export async function measureExtraction(
  plan: ExtractPlan,
  log: (line: string) => void,
): Promise<ExtractFigures> {
  const servers: Partial<Record<Engine, RuntimeProcess>> = {};
  try {
    await startServers(plan, servers, log);
    const all = servers as Record<Engine, RuntimeProcess>;
    const idle = new Map<Engine, Memory>();
    for (const engine of ENGINES) idle.set(engine, await all[engine].memory());
    const { same, total } = await compareAnswers(plan, all, log);
    const bodies = PII_SENTENCES.map((s) => JSON.stringify({ model: plan.modelId, input: s.text }));
    // Warm-up: JIT, connection setup and the first runs at each batch size.
    for (const engine of ENGINES) {
      await runClosedLoop(all[engine].url, bodies, {
        clients: Math.max(...plan.clients),
        durationMs: plan.warmupMs,
        maxRequests: plan.pointMaxRequests,
      });
    }
    const points: ExtractPoint[] = [];
    for (const [c, clients] of plan.clients.entries()) {
      for (let round = 0; round < plan.rounds; round++) {
        const shift = (round + c) % ENGINES.length;
        const order = [...ENGINES.slice(shift), ...ENGINES.slice(0, shift)];
        for (const engine of order) {
          const point = await measurePoint(plan, all[engine], engine, clients, round, bodies);
          points.push(point);
          logPoint(point, log);
        }
      }
    }
    const memory: EngineMemory[] = [];
    for (const engine of ENGINES) {
      memory.push({ engine, idle: idle.get(engine)!, after: await all[engine].memory() });
    }
    return { points, memory, sameEntities: same, sentences: total };
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
  }
}

async function startServers(
  plan: ExtractPlan,
  servers: Partial<Record<Engine, RuntimeProcess>>,
  log: (line: string) => void,
): Promise<void> {
  // One after another: loading models side by side on two cores only muddles start-up times.
  for (const engine of ENGINES) {
    const started = performance.now();
    if (engine === "peer") {
      const config: PeerConfig = {
        modelsDir: plan.modelsDir,
        modelId: plan.modelId,
        threads: plan.threads,
        threshold: plan.threshold,
      };
      servers.peer = await startServerProcess(PEER_SCRIPT, JSON.stringify(config));
    } else {
      servers[engine] = await startRuntimeProcess({
        path: plan.modelPath,
        modelId: plan.modelId,
        threads: plan.threads,
        throughput: engine === "on" ? plan.batchOn : plan.batchOff,
        // The task follows from config.json (BertForTokenClassification).
        load: { onnxFile: plan.onnxFile },
      });
    }
    log(`${engineName(engine, plan)} ready in ${Math.round(performance.now() - started)} ms`);
  }
}

export function engineName(engine: Engine, plan: ExtractPlan): string {
  if (engine === "peer") return "peer (transformers.js pipeline, one call per request)";
  const t = engine === "on" ? plan.batchOn : plan.batchOff;
  return `runtime batching ${engine} (maxBatchSize=${t.maxBatchSize})`;
}

async function postJson(pool: Pool, body: string): Promise<{ status: number; json: unknown }> {
  const response = await pool.request({
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  const text = await response.body.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: response.statusCode, json };
}

/** The entity annotations of a Responses answer: its assistant message's output_text. */
function runtimeSpans(json: unknown): Span[] {
  const output = (json as { output?: unknown[] } | null)?.output ?? [];
  for (const item of output as Array<{ type?: string; content?: unknown[] }>) {
    if (item.type !== "message") continue;
    for (const part of (item.content ?? []) as Array<{ type?: string; annotations?: unknown[] }>) {
      if (part.type !== "output_text") continue;
      const annotations = (part.annotations ?? []) as Array<Record<string, unknown>>;
      return annotations
        .filter((a) => a.type === "entity")
        .map((a) => ({
          label: String(a.label),
          start: Number(a.start_index),
          end: Number(a.end_index),
        }));
    }
  }
  throw new Error(`the runtime's answer has no output_text: ${JSON.stringify(json).slice(0, 300)}`);
}

function peerSpans(json: unknown): Span[] {
  const entities = (json as { entities?: Span[] } | null)?.entities;
  if (!Array.isArray(entities)) throw new Error(`the peer answered ${String(json)}`);
  return entities.map(({ label, start, end }) => ({ label, start, end }));
}

const key = (spans: readonly Span[]) => spans.map((s) => `${s.label}@${s.start}-${s.end}`).join();

/**
 * Before any timing: every engine answers every sentence, and our runtime's
 * entities are compared with the peer's (the parity test checks this fully;
 * here it shows the two do the same work). A refusal or a malformed answer
 * is a broken run.
 */
async function compareAnswers(
  plan: ExtractPlan,
  servers: Record<Engine, RuntimeProcess>,
  log: (line: string) => void,
): Promise<{ same: number; total: number }> {
  const pools = new Map(ENGINES.map((e) => [e, new Pool(servers[e].url, { connections: 1 })]));
  let same = 0;
  try {
    for (const sentence of PII_SENTENCES) {
      const body = JSON.stringify({ model: plan.modelId, input: sentence.text });
      const answers = new Map<Engine, Span[]>();
      for (const engine of ENGINES) {
        const { status, json } = await postJson(pools.get(engine)!, body);
        if (status !== 200) {
          throw new Error(`${engine} answered ${status}: ${JSON.stringify(json).slice(0, 300)}`);
        }
        answers.set(engine, engine === "peer" ? peerSpans(json) : runtimeSpans(json));
      }
      const peer = key(answers.get("peer")!);
      const matches = key(answers.get("on")!) === peer && key(answers.get("off")!) === peer;
      if (matches) same++;
      else {
        log(
          `entities differ on ${JSON.stringify(sentence.text)}: on ${key(answers.get("on")!)}` +
            ` off ${key(answers.get("off")!)} peer ${peer}`,
        );
      }
    }
  } finally {
    await Promise.all([...pools.values()].map((p) => p.close()));
  }
  log(
    `same entities from the runtime and the peer on ${same} of ${PII_SENTENCES.length} sentences`,
  );
  return { same, total: PII_SENTENCES.length };
}

async function measurePoint(
  plan: ExtractPlan,
  server: RuntimeProcess,
  engine: Engine,
  clients: number,
  round: number,
  bodies: readonly string[],
): Promise<ExtractPoint> {
  const cpuBefore = await server.cpuSeconds();
  const result = await runClosedLoop(server.url, bodies, {
    clients,
    durationMs: plan.pointMs,
    maxRequests: plan.pointMaxRequests,
  });
  const serverCpuSeconds = (await server.cpuSeconds()) - cpuBefore;
  return { engine, clients, round, result, serverCpuSeconds };
}

function logPoint(p: ExtractPoint, log: (line: string) => void): void {
  const seconds = p.result.elapsedMs / 1000;
  log(
    `clients=${p.clients} round ${p.round + 1} ${p.engine.padEnd(4)}: ${fmt(p.result.requestsPerSecond)} req/s ` +
      `(${p.result.completed} ok, ${p.result.failed} failed, p50 ${fmt(p.result.p50Ms)} ms, ` +
      `p99 ${fmt(p.result.p99Ms)} ms; cpu server ${fmt((p.serverCpuSeconds / seconds) * 100)}% ` +
      `client ${fmt((p.result.clientCpuSeconds / seconds) * 100)}%)` +
      (p.result.firstFailure ? ` first failure: ${p.result.firstFailure}` : ""),
  );
}
