import {
  env,
  pipeline,
  Tensor,
  type FeatureExtractionPipeline,
  type TextGenerationPipeline,
} from "@huggingface/transformers";

/**
 * transformers.js as the reference for the real models: an independent
 * implementation of tokenisation, chat templates, greedy decoding and
 * pooling on the same ONNX files. It is pointed at the local folder only,
 * so nothing is ever fetched.
 */
function offline(modelsDir: string): void {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = modelsDir;
}

export interface ChatPrompt {
  instructions?: string | undefined;
  input: string;
}

function messagesOf(prompt: ChatPrompt): Array<{ role: string; content: string }> {
  return [
    ...(prompt.instructions !== undefined
      ? [{ role: "system", content: prompt.instructions }]
      : []),
    { role: "user", content: prompt.input },
  ];
}

export interface ReferenceGreedy {
  /** The rendered chat template's ids: what `usage.input_tokens` must count. */
  promptIds: number[];
  /** The new ids, without the end-of-sequence token, as our runtime reports them. */
  ids: number[];
  /** True when the model ended on an end-of-sequence token within the budget. */
  stopped: boolean;
}

function rowOf(tensor: Tensor): number[] {
  const rows = tensor.tolist() as Array<Array<bigint | number>>;
  const row = rows[0];
  if (!row) throw new Error("transformers.js returned an empty tensor");
  return row.map(Number);
}

export class ReferenceGenerator {
  private constructor(
    private readonly generator: TextGenerationPipeline,
    private readonly eosIds: ReadonlySet<number>,
  ) {}

  static async load(modelsDir: string, name: string): Promise<ReferenceGenerator> {
    offline(modelsDir);
    const generator = await pipeline("text-generation", name, { dtype: "q8" });
    const eos = generator.model.generation_config?.eos_token_id ?? [];
    return new ReferenceGenerator(generator, new Set([eos].flat().map(Number)));
  }

  /** Greedy decoding of the chat prompt through the model's `generate`. */
  async greedy(prompt: ChatPrompt, maxNewTokens: number): Promise<ReferenceGreedy> {
    const inputs = this.generator.tokenizer.apply_chat_template(messagesOf(prompt), {
      add_generation_prompt: true,
      return_dict: true,
    }) as { input_ids: Tensor; attention_mask: Tensor };
    const promptIds = rowOf(inputs.input_ids);
    const output = await this.generator.model.generate({
      ...inputs,
      max_new_tokens: maxNewTokens,
      do_sample: false,
    });
    if (!(output instanceof Tensor)) throw new Error("generate did not return a Tensor of ids");
    const all = rowOf(output);
    // generate returns the prompt followed by the new ids.
    if (all.slice(0, promptIds.length).join() !== promptIds.join()) {
      throw new Error("generate's output does not start with the prompt ids");
    }
    const generated = all.slice(promptIds.length);
    const last = generated[generated.length - 1];
    const stopped = last !== undefined && this.eosIds.has(last);
    return { promptIds, ids: stopped ? generated.slice(0, -1) : generated, stopped };
  }

  /** The pipeline's own greedy answer text, as a user of transformers.js gets it. */
  async pipelineText(prompt: ChatPrompt, maxNewTokens: number): Promise<string> {
    const result = (await this.generator(messagesOf(prompt), {
      max_new_tokens: maxNewTokens,
      do_sample: false,
    })) as Array<{ generated_text: Array<{ role: string; content: string }> }>;
    const turns = result[0]?.generated_text ?? [];
    const answer = turns[turns.length - 1];
    if (answer?.role !== "assistant") throw new Error("the pipeline returned no assistant turn");
    return answer.content;
  }

  decode(ids: readonly number[]): string {
    return this.generator.tokenizer.decode([...ids], { skip_special_tokens: true });
  }

  async dispose(): Promise<void> {
    await this.generator.dispose();
  }
}

export class ReferenceEmbedder {
  private constructor(private readonly extractor: FeatureExtractionPipeline) {}

  static async load(modelsDir: string, name: string): Promise<ReferenceEmbedder> {
    offline(modelsDir);
    return new ReferenceEmbedder(await pipeline("feature-extraction", name, { dtype: "q8" }));
  }

  /** Mean-pooled, L2-normalised sentence embeddings, one text per model run. */
  async embed(text: string): Promise<number[]> {
    const output = await this.extractor(text, { pooling: "mean", normalize: true });
    return rowOf(output);
  }

  /** The tokenizer's ids with special tokens, to tell a tokenizer mismatch from a model one. */
  encode(text: string): number[] {
    const encoded = this.extractor.tokenizer(text) as { input_ids: Tensor };
    return rowOf(encoded.input_ids);
  }

  async dispose(): Promise<void> {
    await this.extractor.dispose();
  }
}
