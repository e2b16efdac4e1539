// `npx tsx test/bench/prefix/run.ts [--quick] [--model FOLDER]`: the prefix cache of issue 16.
// On SmolLM2 (the int4 onnxruntime-genai build; bench-gpt when ../shared/models lacks it):
// a conversation of seven turns is played on a runtime with the prefix cache, then the
// eighth turn is asked, streamed, on that runtime and on one without the cache (the same
// messages), and the time to its first delta is compared (target: at least 3x faster with
// the cache). Each eighth-turn question is a different one, so the cache only ever holds
// the earlier turns for it. Also printed: the bytes the cache holds, and the cached tokens.
// Both runtimes run in this process: figures include the client's share of the CPU.
// A miss is reported, not an error.
import { pino } from "pino";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { sharedModel } from "../../support/shared-models.js";

const quick = process.argv.includes("--quick");
const modelFlag = process.argv.indexOf("--model");
const ROUNDS = quick ? 3 : 7;
const ANSWER_TOKENS = quick ? 32 : 64;

const TURNS = [
  "I am planning a week-long trip to Portugal in October. Where should I start?",
  "What is the best way to get from Lisbon to Porto?",
  "Which neighbourhoods in Porto are good to stay in?",
  "What local dishes should I try there?",
  "Is it worth taking a day trip to the Douro valley?",
  "How much should I budget per day, roughly?",
  "What should I pack for the weather in October?",
];
const EIGHTH = [
  "Can you summarise the plan in a few lines?",
  "Which of these places would you skip if I had less time?",
  "What are a few useful Portuguese phrases for the trip?",
  "Is it easy to get around without a car?",
  "What is one thing most visitors miss?",
  "Where should I go on the last evening?",
  "How early should I book the train?",
];

type Message = { role: "user" | "assistant"; content: string };

interface Turn {
  firstMs: number;
  text: string;
  inputTokens: number;
  cachedTokens: number;
}

/** One streamed request, timed to its first text delta. */
async function ask(runtime: RunningRuntime, model: string, input: Message[]): Promise<Turn> {
  const started = performance.now();
  const response = await runtime.post({
    model,
    input,
    temperature: 0,
    max_output_tokens: ANSWER_TOKENS,
    stream: true,
  });
  if (response.status !== 200) throw new Error(`${response.status} ${await response.text()}`);
  let firstMs = NaN;
  let raw = "";
  const decoder = new TextDecoder();
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    raw += decoder.decode(chunk, { stream: true });
    if (Number.isNaN(firstMs) && raw.includes("output_text.delta")) {
      firstMs = performance.now() - started;
    }
  }
  const last = raw.trim().split("\n\n").at(-1)!;
  const data = JSON.parse(last.slice(last.indexOf("data: ") + 6)) as {
    response: {
      output: { content: { text: string }[] }[];
      usage: { input_tokens: number; input_tokens_details: { cached_tokens: number } };
    };
  };
  return {
    firstMs,
    text: data.response.output[0]?.content[0]?.text ?? "",
    inputTokens: data.response.usage.input_tokens,
    cachedTokens: data.response.usage.input_tokens_details.cached_tokens,
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
};
const fmt = (ms: number) => ms.toFixed(1);

async function main(): Promise<void> {
  const folder =
    modelFlag > 0
      ? process.argv[modelFlag + 1]!
      : sharedModel("smollm2-135m-instruct-int4", "genai_config.json");
  const path = folder ?? (await fixtureFolder("bench-gpt"));
  const model = folder ? "smollm2-int4" : "bench-gpt";
  const start = (prefixCacheBytes: number) =>
    startRuntime(
      { path, modelId: model, threads: 2 },
      { generationConcurrency: 4, prefixCacheBytes },
      Math.random,
      pino({ level: "silent" }),
    );

  // Both runtimes up at once, the eighth turns alternating between them, so that the
  // machine's load falls on both alike. The conversation is played on the cached
  // runtime: its answers are the history both get.
  const cached = await start(256 * 2 ** 20);
  const plain = await start(0);
  const history: Message[] = [];
  const withCache: Turn[] = [];
  const without: Turn[] = [];
  let heldBytes = 0;
  let heldMax = 0;
  try {
    await ask(plain, model, [{ role: "user", content: "Warm up." }]);
    for (const turn of TURNS) {
      history.push({ role: "user", content: turn });
      const answer = await ask(cached, model, history);
      history.push({ role: "assistant", content: answer.text });
    }
    for (const [i, question] of EIGHTH.slice(0, ROUNDS).entries()) {
      const input: Message[] = [...history, { role: "user", content: question }];
      const order = i % 2 === 0 ? [plain, cached] : [cached, plain];
      for (const runtime of order) {
        (runtime === cached ? withCache : without).push(await ask(runtime, model, input));
      }
      const lane = cached.service.lane;
      heldBytes = lane.task === "text-generation" ? (lane.prefixCache?.bytes ?? 0) : 0;
      heldMax = Math.max(heldMax, heldBytes);
    }
  } finally {
    await Promise.all([cached.close(), plain.close()]);
  }

  const ratios = withCache.map((t, i) => without[i]!.firstMs / t.firstMs);
  const ratio = median(without.map((t) => t.firstMs)) / median(withCache.map((t) => t.firstMs));
  const same = withCache.filter((t, i) => t.text === without[i]!.text).length;
  const lines = [
    `prefix cache, ${model}, eighth turn of a conversation (${ROUNDS} questions, ${ANSWER_TOKENS}-token answers)`,
    `  prompt            ${median(withCache.map((t) => t.inputTokens))} tokens, of which ${median(withCache.map((t) => t.cachedTokens))} cached (median)`,
    `  first token       without ${fmt(median(without.map((t) => t.firstMs)))} ms [${fmt(Math.min(...without.map((t) => t.firstMs)))}-${fmt(Math.max(...without.map((t) => t.firstMs)))}]` +
      `  with ${fmt(median(withCache.map((t) => t.firstMs)))} ms [${fmt(Math.min(...withCache.map((t) => t.firstMs)))}-${fmt(Math.max(...withCache.map((t) => t.firstMs)))}]`,
    `  speed-up          ${ratio.toFixed(2)}x (per question ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}x)  ${ratio >= 3 ? "PASS" : "MISS"} (>= 3x)`,
    `  cache holds       ${(heldBytes / 2 ** 20).toFixed(1)} MiB after the run (at most ${(heldMax / 2 ** 20).toFixed(1)} MiB)`,
    `  same answers      ${same} of ${ROUNDS} with and without the cache  ${same === ROUNDS ? "PASS" : "MISS"} (target: all)`,
  ];
  for (const line of lines) console.log(line);
}

await main();
