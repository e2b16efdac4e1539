// `npx tsx test/bench/streaming/thread-split.ts [--pairs N] [--tokens N] [--flags "..."] [--only whole|stream]`
// Where the runtime child's CPU goes per request, streamed against whole
// (issue 16(a)), thread by thread: the child runs SmolLM2 int4 as the
// streaming bench runs it, the same greedy request is sent whole and
// streamed in alternating pairs, and around each request every thread's
// CPU time and its switches onto a core are read from
// /proc/<pid>/task/<tid>/{schedstat,comm}. Threads are grouped by name
// (node's main thread, V8's helpers, libuv's pool, onnxruntime's workers),
// so that a difference shows where it is spent, not only that it is.
// `--only` sends one kind of request (both rows then show it): for a CPU
// profile of one kind, `--flags "--cpu-prof --cpu-prof-dir=/tmp/prof-stream"`.
import { readdir, readFile } from "node:fs/promises";
import { Agent } from "undici";
import { sharedModel } from "../../support/shared-models.js";
import { startRuntimeProcess } from "../runtime/runtime-process.js";

const arg = (name: string, fallback: string) =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1]! : fallback;
const PAIRS = Number(arg("--pairs", "6"));
const TOKENS = Number(arg("--tokens", "64"));
const FLAGS = arg("--flags", "").split(" ").filter(Boolean);
const ONLY = arg("--only", "");

interface ThreadTime {
  name: string;
  ns: number;
  slices: number;
}

/** Every live thread's CPU nanoseconds and timeslices, by thread id. */
async function threads(pid: number): Promise<Map<string, ThreadTime>> {
  const out = new Map<string, ThreadTime>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const [stat, comm] = await Promise.all([
      readFile(`/proc/${pid}/task/${tid}/schedstat`, "utf8").catch(() => ""),
      readFile(`/proc/${pid}/task/${tid}/comm`, "utf8").catch(() => "?"),
    ]);
    const [ns, , slices] = stat.split(" ").map(Number);
    // The main thread is the one whose id is the process's.
    const name = tid === String(pid) ? "main" : comm.trim().replace(/\d+$/, "#");
    out.set(tid, { name, ns: ns ?? 0, slices: slices ?? 0 });
  }
  return out;
}

const path = sharedModel("smollm2-135m-instruct-int4", "genai_config.json");
if (!path) throw new Error("needs ../shared/models/smollm2-135m-instruct-int4");
const runtime = await startRuntimeProcess(
  { path, modelId: "m", threads: 2, throughput: { prefixCacheBytes: 0 } },
  FLAGS,
);
const agent = new Agent();
const body = {
  model: "m",
  input: "Write a short story about a lighthouse keeper.",
  temperature: 0,
  max_output_tokens: TOKENS,
};
const url = new URL(runtime.url);

async function once(stream: boolean): Promise<number> {
  const started = performance.now();
  const response = await agent.request({
    origin: url.origin,
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(stream ? { ...body, stream: true } : body),
  });
  // As the streaming bench's client: data listeners, nothing parsed until the end.
  await new Promise<void>((resolve, reject) => {
    response.body.on("data", () => {});
    response.body.once("end", resolve);
    response.body.once("error", reject);
  });
  return performance.now() - started;
}

type Side = Map<string, { ns: number; slices: number }>;
const sides: Record<"whole" | "stream", Side> = { whole: new Map(), stream: new Map() };
const wall = { whole: 0, stream: 0 };

for (let i = 0; i < 2; i++) {
  await once(false);
  await once(true);
}
for (let i = 0; i < PAIRS; i++) {
  for (const stream of i % 2 === 0 ? [false, true] : [true, false]) {
    const key = stream ? "stream" : "whole";
    const before = await threads(runtime.pid);
    wall[key] += await once(ONLY ? ONLY === "stream" : stream);
    const after = await threads(runtime.pid);
    for (const [tid, t] of after) {
      const b = before.get(tid) ?? { ns: 0, slices: 0 };
      const acc = sides[key].get(t.name) ?? { ns: 0, slices: 0 };
      acc.ns += t.ns - b.ns;
      acc.slices += t.slices - b.slices;
      sides[key].set(t.name, acc);
    }
  }
}
await agent.close();
await runtime.stop();

const names = [...new Set([...sides.whole.keys(), ...sides.stream.keys()])].sort();
const ms = (ns: number) => (ns / 1e6 / PAIRS).toFixed(1).padStart(8);
console.log(
  `per request, mean of ${PAIRS}: wall whole ${(wall.whole / PAIRS).toFixed(0)} ms, stream ${(wall.stream / PAIRS).toFixed(0)} ms`,
);
console.log(
  `${"thread".padEnd(20)} ${"whole ms".padStart(8)} ${"stream ms".padStart(9)}  slices w/s`,
);
let total = { whole: 0, stream: 0 };
for (const name of names) {
  const w = sides.whole.get(name) ?? { ns: 0, slices: 0 };
  const s = sides.stream.get(name) ?? { ns: 0, slices: 0 };
  total = { whole: total.whole + w.ns, stream: total.stream + s.ns };
  if (w.ns + s.ns < 1e5 * PAIRS) continue;
  console.log(
    `${name.padEnd(20)} ${ms(w.ns)} ${ms(s.ns)}   ${(w.slices / PAIRS).toFixed(0)}/${(s.slices / PAIRS).toFixed(0)}`,
  );
}
console.log(
  `${"all".padEnd(20)} ${ms(total.whole)} ${ms(total.stream)}  ${(total.stream / total.whole).toFixed(3)}x`,
);
