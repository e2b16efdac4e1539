import type { ChatMessage } from "../../api/input-items.js";
import type { ResponsesRequest } from "../../api/responses-request.js";
import { RuntimeErrors } from "../errors.js";
import type { ModelSession } from "../engine/session.js";
import type { TextTokenizer } from "../engine/tokenizer.js";
import { truncateStart } from "../engine/truncate-text.js";
import { decideTokenLimit, type OverflowPolicy } from "../token-limit.js";
import type { DecoderIO } from "./decoder-io.js";
import { generate, type DecodeJob, type Generated } from "./generate.js";
import type { PromptBuilder } from "./prompt.js";
import { chooseSampler } from "./sampler.js";
import type { StopReason } from "./stopping.js";
import { rememberingSingleTokens, TokenText } from "./token-stream.js";
import { keepNewest, turnsOf } from "./turns.js";

/** A request turned into prompt ids, within the token limit. */
export interface PreparedGeneration {
  promptIds: number[];
  maxNewTokens: number;
  /** True when max_output_tokens, not the token limit, bounds the output. */
  boundByRequest: boolean;
  temperature: number | null | undefined;
  topP: number | null | undefined;
}

export interface GenerationOutcome {
  text: string;
  /** The generated token ids, end-of-sequence excluded. */
  ids: number[];
  inputTokens: number;
  /** Of the input tokens, those whose positions came from the prefix cache. */
  cachedTokens: number;
  outputTokens: number;
  incomplete: boolean;
  stopReason: StopReason;
  firstTokenMs: number;
}

export interface GeneratorLimits {
  /** The InferenceModel's maxTokens, already clamped to the model's context. */
  maxTokens: number;
  policy: OverflowPolicy;
}

export class TextGenerator {
  constructor(
    readonly session: ModelSession,
    readonly io: DecoderIO,
    private readonly tokenizer: TextTokenizer,
    private readonly prompt: PromptBuilder,
    readonly eosIds: ReadonlySet<number>,
    readonly limits: GeneratorLimits,
  ) {}

  /** Every stream's decoder: one token's text is decoded once per process. */
  private readonly decodeWindow = rememberingSingleTokens((ids) => this.tokenizer.decode(ids));

  /** Graphs with a KV cache decode many sequences in one run (see DecodeScheduler). */
  get canBatch(): boolean {
    return this.io.cache.length > 0;
  }

  /** Tokenizes and applies the token limit; throws the 420 error when it must. */
  prepare(request: ResponsesRequest): PreparedGeneration {
    const { maxTokens, policy } = this.limits;
    const { instructions } = request;
    const turns = request.input_messages ?? [{ role: "user", content: request.input }];
    let promptIds = this.prompt.encodeTurns(instructions, turns);
    const whole = promptIds.length;
    const decision = decideTokenLimit({
      inputTokens: promptIds.length,
      maxTokens,
      policy,
      truncation: request.truncation,
      reserve: request.max_output_tokens ?? 0,
    });
    if (decision.kind === "reject") {
      throw RuntimeErrors.contextLengthExceeded(promptIds.length, decision.limit);
    }
    if (decision.kind === "truncate") {
      // The oldest turns go first, whole (a turn's input with its answer,
      // never half of it); within the newest turn, if it alone is over, its
      // oldest messages, then the start of the oldest one left.
      const fits = (messages: readonly ChatMessage[]) =>
        this.prompt.encodeTurns(instructions, messages).length <= decision.budget;
      const conversation = keepNewest(turnsOf(turns), (kept) => fits(kept.flat()));
      const kept = keepNewest(conversation.flat(), fits);
      promptIds = this.prompt.encodeTurns(instructions, kept);
      if (promptIds.length > decision.budget) {
        const [oldest, ...rest] = kept as [ChatMessage, ...ChatMessage[]];
        const measure = (text: string) =>
          this.prompt.encodeTurns(instructions, [{ ...oldest, content: text }, ...rest]).length;
        const cut = truncateStart(this.tokenizer, oldest.content, decision.budget, measure);
        if (cut === null) throw RuntimeErrors.contextLengthExceeded(whole, decision.budget);
        promptIds = this.prompt.encodeTurns(instructions, [{ ...oldest, content: cut }, ...rest]);
      }
    }
    const room = maxTokens - promptIds.length;
    const requested = request.max_output_tokens ?? Infinity;
    return {
      promptIds,
      maxNewTokens: Math.max(0, Math.min(room, requested)),
      boundByRequest: requested <= room,
      temperature: request.temperature,
      topP: request.top_p,
    };
  }

  /** The decode loop's view of a prepared request. */
  job(
    prepared: PreparedGeneration,
    random: () => number,
    onToken?: (id: number) => void,
  ): DecodeJob {
    return {
      promptIds: prepared.promptIds,
      maxNewTokens: prepared.maxNewTokens,
      sampler: chooseSampler({ temperature: prepared.temperature, topP: prepared.topP }, random),
      onToken,
    };
  }

  /** Text out of tokens as they come, for one streamed sequence. */
  textStream(): TokenText {
    return new TokenText(this.decodeWindow);
  }

  outcome(prepared: PreparedGeneration, result: Generated): GenerationOutcome {
    return {
      text: this.tokenizer.decode(result.ids),
      ids: result.ids,
      inputTokens: prepared.promptIds.length,
      cachedTokens: result.cachedTokens,
      outputTokens: result.ids.length,
      incomplete: result.stopReason !== "eos",
      stopReason: result.stopReason,
      firstTokenMs: result.firstTokenMs,
    };
  }

  /**
   * Decodes one sequence on its own; stops at the next token once `signal`
   * aborts. The prompt is prefilled in chunks of `prefillChunkTokens`
   * (prefill.ts' default unless given).
   */
  decode(job: DecodeJob, signal?: AbortSignal, prefillChunkTokens?: number): Promise<Generated> {
    return generate(this.session, this.io, {
      ...job,
      eosIds: this.eosIds,
      signal,
      prefillChunkTokens,
    });
  }

  /** One prepared request, alone and outside any queue (tests and tools). */
  async run(
    prepared: PreparedGeneration,
    random: () => number,
    signal?: AbortSignal,
    prefillChunkTokens?: number,
  ): Promise<GenerationOutcome> {
    const job = this.job(prepared, random);
    return this.outcome(prepared, await this.decode(job, signal, prefillChunkTokens));
  }
}
