import { Pool } from "undici";
import { runtimeGenerate, type RuntimeAnswer } from "./generation-check.js";
import {
  buildLlama,
  cachedLlamaBuild,
  llamaGenerate,
  startLlamaServer,
  type LlamaBuild,
} from "./llama-peer.js";
import type { ChatMessage } from "./peer.js";
import type { BenchPlan, LlamaPlan } from "./plan.js";
import { LONG_PROMPTS, SHORT_PROMPTS } from "./real-prompts.js";
import { startRuntimeProcess, type Memory } from "./runtime-process.js";
import { fmt, median } from "./stats.js";

/**
 * Our runtime against llama.cpp's llama-server (issue "10."), both serving
 * SmolLM2-135M-Instruct from the same Q4_1 weights (ours: the
 * onnxruntime-genai int4 build; theirs: the GGUF), same intra-op threads,
 * greedy, 64 new tokens, 16 sequences decoded together on both sides
 * (--generation-concurrency 16; 16 slots with continuous batching), prompt
 * caching off. Both servers stay up for the whole section; rounds alternate
 * which one goes first, and every ratio is the median of per-round ratios,
 * so a slow spell of the shared machine lands on both.
 *
 * Per round, prompt (~35 and ~500 tokens) and engine: time to first token
 * (median of 1-token requests), then N clients (1, 4, 16) each sending one
 * 64-token request at the same moment: tokens/s = all tokens / wall time.
 * Per-token time is (1-client time - time to first token) / (tokens - 1).
 * Peak resident memory is each process's VmHWM after all points.
 */
export type Engine = "runtime" | "llama";
export type PromptKind = "short" | "long";
export const ENGINES: readonly Engine[] = ["runtime", "llama"];

export interface PointSample {
  tokens: number;
  wallMs: number;
}

export interface PromptFigures {
  kind: PromptKind;
  messages: ChatMessage[];
  promptTokens: Record<Engine, number>;
  sameText: boolean;
  /** Per engine, per round: median time to first token. */
  firstTokenMs: Record<Engine, number[]>;
  /** Per client count, per engine, per round. */
  points: Array<{ clients: number; samples: Record<Engine, PointSample[]> }>;
}

export interface LlamaFigures {
  threads: number;
  rounds: number;
  prompts: PromptFigures[];
  memory: Record<Engine, Memory>;
}

type Generate = (messages: readonly ChatMessage[], maxTokens: number) => Promise<RuntimeAnswer>;

/** The build to measure against, or null (with a line saying why) when it is skipped. */
export async function llamaBuildFor(
  plan: LlamaPlan,
  log: (line: string) => void,
): Promise<LlamaBuild | null> {
  const cached = await cachedLlamaBuild();
  if (cached) return cached;
  if (!plan.buildIfMissing) {
    log(
      "llama.cpp peer: not built yet; skipped in a quick run (build it with " +
        "test/bench/runtime/llama-server.sh, several minutes cold, or run the full benchmark)",
    );
    return null;
  }
  log("llama.cpp peer: building llama-server and fetching the GGUF (several minutes cold)");
  return buildLlama(log);
}

export async function measureVersusLlama(
  plan: BenchPlan,
  llama: LlamaPlan,
  build: LlamaBuild,
  log: (line: string) => void,
): Promise<LlamaFigures> {
  const n = plan.generation.newTokens;
  const maxClients = Math.max(...llama.clients);
  const runtime = await startRuntimeProcess({
    path: llama.modelPath,
    modelId: llama.modelId,
    threads: plan.threads,
    throughput: { generationConcurrency: llama.sequences },
  });
  const peer = await startLlamaServer(build, {
    threads: plan.threads,
    slots: llama.sequences,
    contextTokens: llama.sequences * llama.contextPerSequence,
  });
  const pools = {
    runtime: new Pool(runtime.url, { connections: maxClients }),
    llama: new Pool(peer.url, { connections: maxClients }),
  };
  try {
    const generate: Record<Engine, Generate> = {
      runtime: (messages, k) => runtimeGenerate(pools.runtime, llama.modelId, messages, k),
      llama: (messages, k) => llamaGenerate(pools.llama, messages, k),
    };
    log(
      `versus llama.cpp: runtime on ${llama.modelPath} and llama-server on ${build.gguf}, ` +
        `threads=${plan.threads}, ${llama.sequences} sequences per step on both`,
    );
    const prompts: PromptFigures[] = [];
    for (const kind of llama.prompts) {
      const candidates = kind === "short" ? SHORT_PROMPTS : LONG_PROMPTS;
      prompts.push(await choose(kind, candidates, generate, n, llama.clients, log));
    }
    for (let round = 0; round < llama.rounds; round++) {
      const order: Engine[] = round % 2 === 0 ? ["runtime", "llama"] : ["llama", "runtime"];
      for (const figures of prompts) {
        const { messages } = figures;
        for (const engine of order) {
          const times: number[] = [];
          for (let i = 0; i < llama.firstTokenSamples; i++) {
            const started = performance.now();
            await generate[engine](messages, 1);
            times.push(performance.now() - started);
          }
          figures.firstTokenMs[engine].push(median(times));
        }
        for (const point of figures.points) {
          const line: string[] = [];
          for (const engine of order) {
            const sample = await atOnce(point.clients, () => generate[engine](messages, n));
            point.samples[engine].push(sample);
            line.push(`${engine} ${fmt((sample.tokens / sample.wallMs) * 1000)} tok/s`);
          }
          log(
            `versus llama.cpp round ${round + 1}/${llama.rounds}, ${figures.kind} prompt, ` +
              `clients=${point.clients}: ${line.join(", ")}`,
          );
        }
      }
    }
    return {
      threads: plan.threads,
      rounds: llama.rounds,
      prompts,
      memory: { runtime: await runtime.memory(), llama: await peer.memory() },
    };
  } finally {
    await pools.runtime.close();
    await pools.llama.close();
    await runtime.stop();
    await peer.stop();
  }
}

/** The first candidate on which both engines make the full `n` tokens. */
async function choose(
  kind: PromptKind,
  candidates: ReadonlyArray<ChatMessage[]>,
  generate: Record<Engine, Generate>,
  n: number,
  clients: readonly number[],
  log: (line: string) => void,
): Promise<PromptFigures> {
  for (const [index, messages] of candidates.entries()) {
    const runtime = await generate.runtime(messages, n);
    const llama = await generate.llama(messages, n);
    if (runtime.outputTokens === n && llama.outputTokens === n) {
      log(
        `versus llama.cpp ${kind} prompt: ${runtime.inputTokens} tokens (llama.cpp counts ` +
          `${llama.inputTokens}); same text: ${runtime.text === llama.text ? "yes" : "no"}`,
      );
      return {
        kind,
        messages,
        promptTokens: { runtime: runtime.inputTokens, llama: llama.inputTokens },
        sameText: runtime.text === llama.text,
        firstTokenMs: { runtime: [], llama: [] },
        points: clients.map((count) => ({ clients: count, samples: { runtime: [], llama: [] } })),
      };
    }
    log(
      `versus llama.cpp ${kind} prompt candidate ${index}: ${runtime.outputTokens} and ` +
        `${llama.outputTokens} tokens before end of sequence; trying the next`,
    );
  }
  throw new Error(`no ${kind} prompt candidate runs ${n} tokens on both engines`);
}

async function atOnce(clients: number, request: () => Promise<RuntimeAnswer>) {
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: clients }, request));
  return {
    tokens: answers.reduce((sum, a) => sum + a.outputTokens, 0),
    wallMs: performance.now() - started,
  };
}
