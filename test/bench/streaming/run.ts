// `npx tsx test/bench/streaming/run.ts [--quick]`: streaming figures of issue 16.
// (a) The runtime on SmolLM2 (the int4 build, else the int8 one, else bench-gpt
//     when ../shared/models lacks both): time to first token of a stream, and
//     tokens/s streamed against the same greedy request answered whole, in
//     alternating pairs, the ratio taken per pair (target: at least 0.98x at the
//     median). The prefix cache is off, so that every request prefills alike.
//     The runtime runs in a child process, so that the client's reads of the
//     stream do not share its event loop.
// (b) Time to first token through the gateway against the runtime directly,
//     at 1 and 16 concurrent clients (target: under 1 ms added at p50), with
//     the runtime (tiny-gpt) and the gateway in child processes as
//     bench:gateway runs them: all sharing the cores (informative), then
//     pinned, the gateway alone on core 0 and the runtime and the clients on
//     core 1, where the target applies (see through-gateway.ts).
// `--only runtime` or `--only gateway` runs one section. Prints one table.
import { fixtureFolder } from "../../runtime/support/runtime-server.js";
import { startRuntimeProcess } from "../runtime/runtime-process.js";
import { SHARED_ONNX_FILE, sharedModel } from "../../support/shared-models.js";
import { gatewayStreamingSection } from "./through-gateway.js";

const quick = process.argv.includes("--quick");
const ROUNDS = quick ? 3 : 10;

interface Timed {
  firstMs: number;
  totalMs: number;
  outputTokens: number;
}

/** One request, timed to its first delta (stream) and to its end. */
async function timed(
  url: string,
  body: object,
  headers: Record<string, string> = {},
): Promise<Timed> {
  const started = performance.now();
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  if (response.status !== 200)
    throw new Error(`${url}: ${response.status} ${await response.text()}`);
  let firstMs = NaN;
  let text = "";
  const decoder = new TextDecoder();
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
    if (Number.isNaN(firstMs) && text.includes("output_text.delta"))
      firstMs = performance.now() - started;
  }
  const totalMs = performance.now() - started;
  const usage = /"output_tokens":(\d+)/g;
  let outputTokens = 0;
  for (let m = usage.exec(text); m; m = usage.exec(text)) outputTokens = Number(m[1]);
  return { firstMs: Number.isNaN(firstMs) ? totalMs : firstMs, totalMs, outputTokens };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
};
const spread = (values: number[], digits: number) =>
  `[${Math.min(...values).toFixed(digits)}, ${Math.max(...values).toFixed(digits)}]`;
const rows: string[][] = [];
const row = (...cells: string[]) => rows.push(cells);

async function runtimeSection(): Promise<void> {
  const int4 = sharedModel("smollm2-135m-instruct-int4", "genai_config.json");
  const int8 = int4 ? null : sharedModel("smollm2-135m-instruct");
  const path = int4 ?? int8 ?? (await fixtureFolder("bench-gpt"));
  const modelId = int4 ? "smollm2-int4" : int8 ? "smollm2-int8" : "bench-gpt";
  const runtime = await startRuntimeProcess({
    path,
    modelId,
    threads: 2,
    throughput: { prefixCacheBytes: 0 },
    ...(int8 ? { load: { onnxFile: SHARED_ONNX_FILE } } : {}),
  });
  try {
    const body = {
      model: modelId,
      input: "Write a short story about a lighthouse keeper.",
      temperature: 0,
      max_output_tokens: 64,
    };
    const url = `${runtime.url}/v1/responses`;
    await timed(url, body); // warm
    const whole: Timed[] = [];
    const streamed: Timed[] = [];
    // Alternating which goes first, so that neither always follows the other.
    for (let i = 0; i < ROUNDS; i++) {
      if (i % 2 === 0) {
        whole.push(await timed(url, body));
        streamed.push(await timed(url, { ...body, stream: true }));
      } else {
        streamed.push(await timed(url, { ...body, stream: true }));
        whole.push(await timed(url, body));
      }
    }
    const rateOf = (r: Timed) => (r.outputTokens / r.totalMs) * 1000;
    const rate = (t: Timed[]) => median(t.map(rateOf));
    const ratios = streamed.map((r, i) => rateOf(r) / rateOf(whole[i]!));
    const ratio = median(ratios);
    const firsts = streamed.map((r) => r.firstMs);
    row(
      `runtime ${modelId}: whole answer`,
      `${rate(whole).toFixed(1)} tok/s ${spread(whole.map(rateOf), 1)}`,
      "",
    );
    row(
      `runtime ${modelId}: stream`,
      `${rate(streamed).toFixed(1)} tok/s ${spread(streamed.map(rateOf), 1)}, first token ${median(firsts).toFixed(1)} ms ${spread(firsts, 1)}`,
      `${ratio.toFixed(3)}x per pair ${spread(ratios, 3)} ${ratio >= 0.98 ? "PASS" : "MISS"} (>= 0.98x)`,
    );
  } finally {
    await runtime.stop();
  }
}

const only = process.argv.includes("--only")
  ? process.argv[process.argv.indexOf("--only") + 1]
  : null;
if (only !== "gateway") await runtimeSection();
if (only !== "runtime") {
  rows.push(...(await gatewayStreamingSection({ rounds: ROUNDS, clients: [1, 16] })));
}
const widths = [0, 1, 2].map((c) => Math.max(...rows.map((r) => r[c]!.length)));
for (const r of rows) console.log(r.map((cell, c) => cell.padEnd(widths[c]!)).join("  "));
