import { dirname, basename } from "node:path";
import { BaseStreamer, env, pipeline, type TextStreamer } from "@huggingface/transformers";
import { sessionOptions } from "../../../runtime/engine/session.js";

/**
 * (c) The peer a user would otherwise pick: @huggingface/transformers'
 * text-generation pipeline on the same folder and file (`fp32` reads
 * onnx/model.onnx, `q8` onnx/model_quantized.onnx), greedy, with the same
 * intra-op threads. It is handed the same chat messages our runtime gets, so
 * it pays for its chat template and tokenizer as our runtime does.
 */
export interface ChatMessage {
  role: "system" | "user";
  content: string;
}

export interface PeerRun {
  /** Generated ids as the streamer saw them (the prompt excluded). */
  ids: number[];
  promptTokens: number;
  totalMs: number;
}

export interface Peer {
  generate(messages: ChatMessage[], newTokens: number): Promise<PeerRun>;
  /** The chat template's prompt ids, as the pipeline tokenizes them. */
  promptIds(messages: ChatMessage[]): number[];
  decode(ids: readonly number[]): string;
  release(): Promise<void>;
}

/** Counts what generate() pushes: first the prompt, then one token per step. */
class CountingStreamer extends BaseStreamer {
  promptTokens = 0;
  readonly ids: number[] = [];
  private sawPrompt = false;

  override put(value: bigint[][]): void {
    const row = value[0] ?? [];
    if (!this.sawPrompt) {
      this.sawPrompt = true;
      this.promptTokens = row.length;
      return;
    }
    for (const id of row) this.ids.push(Number(id));
  }

  override end(): void {}
}

export async function openPeer(
  modelFolder: string,
  threads: number,
  dtype: "fp32" | "q8" = "fp32",
): Promise<Peer> {
  // Offline: the folder is the only place the pipeline may read from.
  env.allowRemoteModels = false;
  env.localModelPath = dirname(modelFolder);
  const generator = await pipeline("text-generation", basename(modelFolder), {
    dtype,
    // The runtime's own session options, so the peer is not handicapped by them.
    session_options: sessionOptions(threads),
  });

  return {
    async generate(messages, newTokens) {
      const streamer = new CountingStreamer();
      const started = performance.now();
      await generator(messages, {
        max_new_tokens: newTokens,
        do_sample: false,
        // Typed as TextStreamer, but generate() only calls put() and end().
        streamer: streamer as unknown as TextStreamer,
      });
      return {
        ids: streamer.ids,
        promptTokens: streamer.promptTokens,
        totalMs: performance.now() - started,
      };
    },
    promptIds(messages) {
      // What the pipeline does with chat input: render, then encode without specials.
      const text = generator.tokenizer.apply_chat_template(messages, {
        add_generation_prompt: true,
        tokenize: false,
      });
      return generator.tokenizer.encode(text, { add_special_tokens: false });
    },
    decode: (ids) => generator.tokenizer.decode([...ids], { skip_special_tokens: true }),
    release: () => generator.dispose(),
  };
}
