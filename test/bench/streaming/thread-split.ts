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
// `--deaf`: the client does not read its socket until well after the answer
// is written (a paused raw socket, read after a fixed wait), so it is never
// woken while the runtime decodes: what the runtime spends on a stream by
// itself, without a reader competing for the cores at every token.
// `--perf <file>`: `perf record -e cpu-clock -g` of the child over the
// measured pairs (add `--flags --perf-basic-prof` for JavaScript's names),
// for the kernel's share (the socket writes) beside the process's own.
// `--pinned`: the runtime on one onnxruntime thread alone on core 1 and the
// client on core 0, as bench:streaming's (b) pins them: the stream's own
// cost with no reader competing for the runtime's core.
import { readdir, readFile } from "node:fs/promises";
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { setPriority } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent } from "undici";
import { sharedModel } from "../../support/shared-models.js";
import { pinning } from "../gateway/cpu-affinity.js";
import { startRuntimeProcess } from "../runtime/runtime-process.js";
import { storyRequest } from "./story-request.js";

const arg = (name: string, fallback: string) =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1]! : fallback;
const PAIRS = Number(arg("--pairs", "6"));
const TOKENS = Number(arg("--tokens", "64"));
const FLAGS = arg("--flags", "").split(" ").filter(Boolean);
const ONLY = arg("--only", "");
const DEAF = process.argv.includes("--deaf");
const PERF = arg("--perf", "");
const RAW = process.argv.includes("--raw");
const NICE = Number(arg("--nice", "0"));
const PINNED = process.argv.includes("--pinned");

interface ThreadTime {
  name: string;
  ns: number;
  slices: number;
  /** User and system CPU, in 10 ms ticks: whether the time is JavaScript and native code or the kernel's. */
  user: number;
  system: number;
}

/** Every live thread's CPU nanoseconds and timeslices, by thread id. */
async function threads(pid: number): Promise<Map<string, ThreadTime>> {
  const out = new Map<string, ThreadTime>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const [sched, comm, stat] = await Promise.all([
      readFile(`/proc/${pid}/task/${tid}/schedstat`, "utf8").catch(() => ""),
      readFile(`/proc/${pid}/task/${tid}/comm`, "utf8").catch(() => "?"),
      readFile(`/proc/${pid}/task/${tid}/stat`, "utf8").catch(() => ")"),
    ]);
    const [ns, , slices] = sched.split(" ").map(Number);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // The main thread is the one whose id is the process's.
    const name = tid === String(pid) ? "main" : comm.trim().replace(/\d+$/, "#");
    out.set(tid, {
      name,
      ns: ns ?? 0,
      slices: slices ?? 0,
      user: Number(fields[11]) || 0,
      system: Number(fields[12]) || 0,
    });
  }
  return out;
}

const path = sharedModel("smollm2-135m-instruct-int4", "genai_config.json");
if (!path) throw new Error("needs ../shared/models/smollm2-135m-instruct-int4");
const runtime = await startRuntimeProcess(
  { path, modelId: "m", threads: PINNED ? 1 : 2, throughput: { prefixCacheBytes: 0 } },
  FLAGS,
);
if (PINNED) {
  const pin = pinning();
  if (!pin) throw new Error("--pinned needs taskset and two cores");
  pin.pin(runtime.pid, "1");
  pin.pin(process.pid, "0");
}
const agent = new Agent();
const body = storyRequest("m", TOKENS);
const url = new URL(runtime.url);

/** A raw HTTP/1.1 request whose socket is not read until `waitMs` have passed. */
async function deaf(stream: boolean, waitMs: number): Promise<number> {
  const started = performance.now();
  const json = JSON.stringify(stream ? { ...body, stream: true } : body);
  const socket = connect(Number(url.port), url.hostname);
  socket.pause();
  socket.write(
    `POST /v1/responses HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(json)}\r\nconnection: close\r\n\r\n${json}`,
  );
  await sleep(waitMs);
  let text = "";
  socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
  socket.resume();
  await new Promise((resolve) => socket.once("close", resolve));
  if (!/"output_tokens":\d+/.test(text)) throw new Error(`no usage in ${text.slice(0, 200)}`);
  return performance.now() - started;
}

async function once(stream: boolean): Promise<number> {
  if (DEAF) return deaf(stream, 3000);
  if (RAW) return deaf(stream, 0);
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

interface Spent {
  ns: number;
  slices: number;
  user: number;
  system: number;
}
type Side = Map<string, Spent>;
const none = (): Spent => ({ ns: 0, slices: 0, user: 0, system: 0 });
const sides: Record<"whole" | "stream", Side> = { whole: new Map(), stream: new Map() };
const wall = { whole: 0, stream: 0 };
/** This process's own CPU milliseconds (the client's), per side. */
const client = { whole: 0, stream: 0 };

// Only this thread, the client's: the runtime child was started before.
if (NICE) setPriority(NICE);
for (let i = 0; i < 2; i++) {
  await once(false);
  await once(true);
}
const perf = PERF
  ? spawn("perf", ["record", "-e", "cpu-clock", "-g", "-o", PERF, "-p", String(runtime.pid)], {
      stdio: "inherit",
    })
  : null;
for (let i = 0; i < PAIRS; i++) {
  for (const stream of i % 2 === 0 ? [false, true] : [true, false]) {
    const key = stream ? "stream" : "whole";
    const before = await threads(runtime.pid);
    const clientBefore = process.cpuUsage();
    wall[key] += await once(ONLY ? ONLY === "stream" : stream);
    const used = process.cpuUsage(clientBefore);
    client[key] += (used.user + used.system) / 1000;
    const after = await threads(runtime.pid);
    for (const [tid, t] of after) {
      const b = before.get(tid) ?? none();
      const acc = sides[key].get(t.name) ?? none();
      acc.ns += t.ns - b.ns;
      acc.slices += t.slices - b.slices;
      acc.user += t.user - b.user;
      acc.system += t.system - b.system;
      sides[key].set(t.name, acc);
    }
  }
}
if (perf) {
  perf.kill("SIGINT");
  await new Promise((resolve) => perf.once("exit", resolve));
}
await agent.close();
await runtime.stop();

const names = [...new Set([...sides.whole.keys(), ...sides.stream.keys()])].sort();
const ms = (ns: number) => (ns / 1e6 / PAIRS).toFixed(1).padStart(8);
console.log(
  `per request, mean of ${PAIRS}: wall whole ${(wall.whole / PAIRS).toFixed(0)} ms, stream ${(wall.stream / PAIRS).toFixed(0)} ms`,
);
console.log(
  `${"thread".padEnd(20)} ${"whole ms".padStart(8)} ${"stream ms".padStart(9)}  slices w/s  user+sys ms w / s`,
);
const ticks = (t: Spent) =>
  `${((t.user * 10) / PAIRS).toFixed(0)}+${((t.system * 10) / PAIRS).toFixed(0)}`;
let total = { whole: 0, stream: 0 };
for (const name of names) {
  const w = sides.whole.get(name) ?? none();
  const s = sides.stream.get(name) ?? none();
  total = { whole: total.whole + w.ns, stream: total.stream + s.ns };
  if (w.ns + s.ns < 1e5 * PAIRS) continue;
  console.log(
    `${name.padEnd(20)} ${ms(w.ns)} ${ms(s.ns)}   ${(w.slices / PAIRS).toFixed(0)}/${(s.slices / PAIRS).toFixed(0)}  ${ticks(w)} / ${ticks(s)}`,
  );
}
console.log(
  `${"client (this process)".padEnd(20)} ${(client.whole / PAIRS).toFixed(1).padStart(8)} ${(client.stream / PAIRS).toFixed(1).padStart(9)}`,
);
console.log(
  `${"all".padEnd(20)} ${ms(total.whole)} ${ms(total.stream)}  ${(total.stream / total.whole).toFixed(3)}x`,
);
