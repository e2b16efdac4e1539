// `npx tsx test/bench/streaming/gc-trace.ts [--pairs N] [--tokens N] [--flags "--trace-gc ..."] [--dump]`
// The runtime child's garbage collections per request on SmolLM2 int4,
// streamed against whole (issue 16(a)): the child runs with `--trace-gc`
// (printed on its stdout), each request is framed by the lines printed before
// and after it, and the GC lines within are counted by kind and reason, with
// their main-thread pauses. `--dump` writes each side's lines to
// /tmp/gc-trace-{whole,stream}.log (for `--trace-gc-nvp` and the like).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Agent } from "undici";
import { sharedModel } from "../../support/shared-models.js";
import { storyRequest } from "./story-request.js";

const arg = (name: string, fallback: string) =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1]! : fallback;
const PAIRS = Number(arg("--pairs", "6"));
const FLAGS = arg("--flags", "--trace-gc").split(" ").filter(Boolean);
const TOKENS = Number(arg("--tokens", "64"));

const path = sharedModel("smollm2-135m-instruct-int4", "genai_config.json");
if (!path) throw new Error("needs ../shared/models/smollm2-135m-instruct-int4");
const script = fileURLToPath(new URL("../runtime/runtime-child.ts", import.meta.url));
const config = { path, modelId: "m", threads: 2, throughput: { prefixCacheBytes: 0 } };
const child = spawn(
  process.execPath,
  [...FLAGS, "--import", "tsx", script, JSON.stringify(config)],
  {
    stdio: ["pipe", "pipe", "inherit"],
  },
);
const lines: string[] = [];
let partial = "";
let resolveUrl: (url: string) => void;
const ready = new Promise<string>((r) => (resolveUrl = r));
child.stdout.on("data", (chunk: Buffer) => {
  partial += chunk.toString("utf8");
  const parts = partial.split("\n");
  partial = parts.pop()!;
  for (const line of parts) {
    if (line.startsWith('{"url"')) resolveUrl((JSON.parse(line) as { url: string }).url);
    else lines.push(line);
  }
});
const url = `${await ready}/v1/responses`;
const agent = new Agent();
const body = storyRequest("m", TOKENS);

async function once(stream: boolean): Promise<{ ms: number; tokens: number }> {
  const started = performance.now();
  const response = await agent.request({
    origin: new URL(url).origin,
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(stream ? { ...body, stream: true } : body),
  });
  const text = await response.body.text();
  const m = [...text.matchAll(/"output_tokens":(\d+)/g)].at(-1);
  return { ms: performance.now() - started, tokens: Number(m?.[1]) };
}

// Lets the child's stdout arrive before a request's lines are cut off.
const settle = () => new Promise((r) => setTimeout(r, 50));
interface Tally {
  count: Map<string, number>;
  ms: Map<string, number>;
  wall: number[];
}
const tally = (): Tally => ({ count: new Map(), ms: new Map(), wall: [] });
const sides = { whole: tally(), stream: tally() };
const dump: Record<string, string[]> = { whole: [], stream: [] };

for (let i = 0; i < 2; i++) {
  await once(false);
  await once(true);
}
await settle();
for (let i = 0; i < PAIRS; i++) {
  for (const stream of i % 2 === 0 ? [false, true] : [true, false]) {
    const side = sides[stream ? "stream" : "whole"];
    const from = lines.length;
    const r = await once(stream);
    await settle();
    side.wall.push(r.ms);
    for (const line of lines.slice(from)) {
      dump[stream ? "stream" : "whole"]!.push(line);
      // "[pid]  1234 ms: Mark-Compact 37.6 (103.4) -> 36.0 (103.7) MB, pooled: 0 MB, 3.36 / 0.01 ms  (...) reason"
      const gc =
        /ms: (Scavenge|Mark-Compact(?: \(reduce\))?|Minor Mark-Sweep) .*? MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ [\d.]+ ms.*?current mu = [\d.]+\) (.*)$/.exec(
          line,
        );
      if (!gc) continue;
      const key = `${gc[1]}: ${gc[3]!}`;
      side.count.set(key, (side.count.get(key) ?? 0) + 1);
      side.ms.set(key, (side.ms.get(key) ?? 0) + Number(gc[2]));
    }
  }
}
for (const [name, side] of Object.entries(sides)) {
  const wall = side.wall.reduce((a, b) => a + b, 0) / side.wall.length;
  console.log(`${name}: ${PAIRS} requests, mean ${wall.toFixed(0)} ms`);
  for (const [key, n] of [...side.count].sort()) {
    console.log(`  ${key.padEnd(60)} ${String(n).padStart(4)}  ${side.ms.get(key)!.toFixed(1)} ms`);
  }
}
if (process.argv.includes("--dump")) {
  const { writeFileSync } = await import("node:fs");
  for (const [name, l] of Object.entries(dump))
    writeFileSync(`/tmp/gc-trace-${name}.log`, l.join("\n"));
}
await agent.close();
child.kill("SIGTERM");
