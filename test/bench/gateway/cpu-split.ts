import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { threadCpuSeconds } from "./child-process.js";
import type { Suite } from "./compare.js";
import { measuredRun } from "./measure.js";
import type { GatewayBenchPlan } from "./plan.js";

/**
 * Where the gateway's CPU goes, by component, at the throughput target's
 * load (16 clients, pinned): two extra windows through the gateway after
 * the measured points. In the first, the CPU of its main thread and of its
 * other threads (V8's compiler and GC helpers, libuv's pool) per request,
 * from /proc; in the second, its main thread under V8's sampling profiler
 * (asked for over IPC, so nothing else runs with it), whose shares of the
 * main thread's busy time are scaled to the first window's main-thread
 * CPU per request. The shares are of a profiled thread, which the sampling
 * slows a little; they are what the split tells.
 */
export interface CpuSplit {
  clients: number;
  requests: number;
  /** CPU ms per request of the whole process over the window, settling included. */
  totalMs: number;
  /** Of which on threads other than the main one. */
  otherThreadsMs: number;
  /** The main thread's CPU ms per request, by component, largest first. */
  components: { name: string; ms: number }[];
}

export const SPLIT_CLIENTS = 16;

/** Components, by the script a stack frame runs in; first match wins. */
const COMPONENTS: { name: string; test: (url: string) => boolean }[] = [
  {
    name: "ledger (PGlite, kysely, store)",
    test: (u) =>
      u.startsWith("wasm://") ||
      /node_modules\/(@electric-sql\/pglite|kysely|pg|pg-protocol|pg-pool)\//.test(u) ||
      u.includes("/gateway/store/"),
  },
  { name: "usage exporter", test: (u) => u.includes("/gateway/usage/") },
  { name: "journal (outbox)", test: (u) => u.includes("/gateway/outbox/") },
  { name: "limits (Valkey client)", test: (u) => /node_modules\/(iovalkey|ioredis)\//.test(u) },
  { name: "logging (pino)", test: (u) => /node_modules\/(pino|sonic-boom|fast-redact)/.test(u) },
  { name: "metrics (prom-client)", test: (u) => u.includes("node_modules/prom-client/") },
  { name: "validation (zod)", test: (u) => u.includes("node_modules/zod/") },
  { name: "upstream (undici)", test: (u) => u.includes("node_modules/undici/") },
  {
    name: "fastify",
    test: (u) =>
      /node_modules\/(fastify|find-my-way|avvio|fast-json-stringify|@fastify|secure-json-parse|light-my-request|process-warning|toad-cache|fast-querystring)\//.test(
        u,
      ),
  },
];
const OURS = "gateway hooks and handler (ours)";
const NODE = "node (HTTP, sockets, timers, promises)";
const GC = "garbage collector";
const OTHER = "other";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/**
 * A sample's component: the first frame from the leaf up that belongs to
 * one (so `writev` under the journal's write is the journal's, under a
 * reply Node's); else our own code, Node's internals, or the GC.
 */
export function componentOf(
  stack: readonly { functionName: string; url: string }[],
  root: string,
): string {
  let ours = false;
  let node = false;
  for (const frame of stack) {
    const url = frame.url;
    for (const c of COMPONENTS) if (c.test(url)) return c.name;
    if (url.startsWith(root) && !url.includes("/node_modules/")) ours = true;
    else if (url.startsWith("node:") || (url === "" && !frame.functionName.startsWith("(")))
      node = true;
  }
  if (ours) return OURS;
  if (stack[0]?.functionName === "(garbage collector)") return GC;
  return node ? NODE : OTHER;
}

/** Busy microseconds of the main thread by component (idle left out). */
export function splitProfile(profile: CpuProfile, root: string): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const memo = new Map<number, string | null>();
  const totals = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    let component = memo.get(id);
    if (component === undefined) {
      const stack = [];
      for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
        const frame = byId.get(at)!.callFrame;
        if (frame.functionName === "(root)") break;
        stack.push(frame);
      }
      // Idle, and the profiler's own start and stop (node:inspector), are no one's.
      const leaf = stack[0]?.functionName;
      component =
        leaf === undefined || leaf === "(idle)" || stack.some((f) => f.url === "node:inspector")
          ? null
          : leaf === "(program)"
            ? OTHER
            : componentOf(stack, root);
      memo.set(id, component);
    }
    if (component === null) return;
    totals.set(component, (totals.get(component) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return totals;
}

/** One window at the split's load: requests served, and the CPU seconds of the main thread and of the whole process. */
async function cpuWindow(
  plan: GatewayBenchPlan,
  suite: Suite,
): Promise<{ requests: number; main: number; total: number }> {
  const gateway = suite.gateway;
  const mainBefore = await threadCpuSeconds(gateway.pid, gateway.pid);
  const totalBefore = await gateway.cpuSeconds();
  const part = await measuredRun(
    gateway.url,
    suite.requests,
    { clients: SPLIT_CLIENTS, durationMs: plan.splitMs, maxRequests: plan.halfMaxRequests },
    [gateway],
    { children: [gateway, ...suite.others], maxMs: plan.settleMaxMs },
  );
  return {
    requests: part.run.completed,
    main: (await threadCpuSeconds(gateway.pid, gateway.pid)) - mainBefore,
    total: (await gateway.cpuSeconds()) - totalBefore,
  };
}

/**
 * Two windows through the suite's gateway (already pinned): the first
 * without the profiler, for the CPU per request of the main thread and of
 * the other threads (the profiler's own thread would count among those);
 * the second profiled, for the shares of the main thread's time.
 */
export async function measureCpuSplit(
  plan: GatewayBenchPlan,
  suite: Suite,
): Promise<CpuSplit | null> {
  const gateway = suite.gateway;
  if (!gateway.ask) return null;
  const plain = await cpuWindow(plan, suite);
  const dir = await mkdtemp(join(tmpdir(), "modelgate-bench-split-"));
  try {
    const path = join(dir, "main.cpuprofile");
    await gateway.ask({ profile: "start" });
    await cpuWindow(plan, suite);
    await gateway.ask({ profile: "stop", path });
    const { requests, main, total } = plain;
    if (requests === 0 || !Number.isFinite(main) || !Number.isFinite(total)) return null;
    const busy = splitProfile(
      JSON.parse(await readFile(path, "utf8")) as CpuProfile,
      `${pathToFileURL(process.cwd()).href}/`,
    );
    const busyUs = [...busy.values()].reduce((a, b) => a + b, 0);
    const mainMs = (main * 1000) / requests;
    return {
      clients: SPLIT_CLIENTS,
      requests,
      totalMs: (total * 1000) / requests,
      otherThreadsMs: Math.max(0, ((total - main) * 1000) / requests),
      components: [...busy]
        .map(([name, us]) => ({ name, ms: busyUs > 0 ? (us / busyUs) * mainMs : 0 }))
        .sort((a, b) => b.ms - a.ms),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The report's lines for one split. */
export function splitLines(split: CpuSplit, indent: string): string[] {
  const main = split.components.reduce((a, c) => a + c.ms, 0);
  return [
    `${indent}gateway cpu by component (${split.clients} clients, pinned, a window of ${split.requests} requests, then a profiled one): ` +
      `${split.totalMs.toFixed(3)} ms/request = main thread ${main.toFixed(3)} + other threads ${split.otherThreadsMs.toFixed(3)}`,
    ...split.components
      .filter((c) => c.ms >= 0.0005)
      .map((c) => `${indent}  ${c.ms.toFixed(3)} ms  ${c.name}`),
  ];
}
