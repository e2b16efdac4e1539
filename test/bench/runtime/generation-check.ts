import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Pool } from "undici";
import type { BareLoop } from "./bare-loop.js";
import { responsesBody } from "./generation-prompt.js";
import type { ChatMessage, Peer } from "./peer.js";

/**
 * The parts of a generation comparison that keep it fair: a prompt whose
 * greedy continuation runs the full length on every engine, a check that all
 * three engines make the same tokens, and the runtime's HTTP call itself.
 */
export interface Chosen {
  messages: ChatMessage[];
  ids: number[];
}

export async function eosIds(folder: string): Promise<Set<number>> {
  const config = JSON.parse(await readFile(join(folder, "generation_config.json"), "utf8")) as {
    eos_token_id?: number | number[];
  };
  const raw = config.eos_token_id ?? [];
  return new Set(Array.isArray(raw) ? raw : [raw]);
}

/** The first candidate whose greedy continuation has no end-of-sequence token. */
export async function choosePrompt(
  candidates: ReadonlyArray<ChatMessage[]>,
  bare: BareLoop,
  peer: Peer,
  eos: ReadonlySet<number>,
  newTokens: number,
  log: (line: string) => void,
): Promise<Chosen> {
  for (const [index, messages] of candidates.entries()) {
    const ids = peer.promptIds(messages);
    const run = await bare.generate(ids, newTokens);
    const stopAt = run.ids.findIndex((id) => eos.has(id));
    if (stopAt < 0) return { messages, ids };
    log(`generation: prompt candidate ${index} meets eos after ${stopAt} tokens; trying the next`);
  }
  throw new Error(`every prompt candidate meets eos within ${newTokens} greedy tokens`);
}

interface ResponsesBody {
  usage?: { output_tokens?: number };
  output?: Array<{ content?: Array<{ text?: string }> }>;
}

export interface RuntimeAnswer {
  outputTokens: number;
  inputTokens: number;
  text: string;
}

export async function runtimeGenerate(
  pool: Pool,
  modelId: string,
  messages: readonly ChatMessage[],
  newTokens: number,
): Promise<RuntimeAnswer> {
  const response = await pool.request({
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: responsesBody(modelId, messages, newTokens),
  });
  const body = (await response.body.json()) as ResponsesBody;
  if (response.statusCode !== 200) throw new Error(`runtime answered ${response.statusCode}`);
  return {
    outputTokens: body.usage?.output_tokens ?? 0,
    inputTokens: Number(response.headers["x-modelgate-input-tokens"]),
    text: body.output?.[0]?.content?.[0]?.text ?? "",
  };
}

export async function checkSameTokens(
  pool: Pool,
  modelId: string,
  bare: BareLoop,
  peer: Peer,
  chosen: Chosen,
  newTokens: number,
): Promise<{ runtime: number; peer: number; same: boolean }> {
  const bareIds = (await bare.generate(chosen.ids, newTokens)).ids;
  const peerIds = (await peer.generate(chosen.messages, newTokens)).ids;
  const answer = await runtimeGenerate(pool, modelId, chosen.messages, newTokens);
  const same =
    answer.inputTokens === chosen.ids.length &&
    peerIds.join(",") === bareIds.join(",") &&
    answer.text === peer.decode(bareIds);
  return { runtime: answer.outputTokens, peer: peerIds.length, same };
}
