import type { ModelTask } from "../../api/responses-request.js";
import { modelLoadError } from "../errors.js";
import { ModelSession } from "../engine/session.js";
import { TextTokenizer } from "../engine/tokenizer.js";
import { readDecoderIO } from "../generation/decoder-io.js";
import { PromptBuilder } from "../generation/prompt.js";
import { eosIdsFrom } from "../generation/stopping.js";
import { TextGenerator } from "../generation/text-generator.js";
import type { ZeroShotClassifier } from "../classify/classifier.js";
import { DEFAULT_NLI_TEMPLATE, NliClassifier, nliLabelsFrom } from "../classify/nli-classifier.js";
import {
  DEFAULT_SIMILARITY_TEMPLATE,
  SimilarityClassifier,
  poolingFrom,
  type Calibration,
} from "../classify/similarity-classifier.js";
import type { EntityExtractor } from "../extract/extractor.js";
import {
  DEFAULT_MAX_RUN_TOKENS,
  DEFAULT_WINDOW_OVERLAP,
  TokenClassifier,
} from "../extract/token-classifier.js";
import { normalizerFlagsFrom } from "../extract/token-offsets.js";
import type { OverflowPolicy } from "../token-limit.js";
import { configNumber, readModelFolder, type ModelFolder } from "./model-folder.js";

export type ZeroShotMethod = "nli" | "similarity";

export interface LoadOptions {
  path: string;
  onnxFile?: string | undefined;
  task?: ModelTask | undefined;
  zeroShotMethod?: ZeroShotMethod | undefined;
  /**
   * The InferenceModel's maxTokens; defaults to the model's context length. For
   * entity extraction, which reads long inputs in windows, it bounds the whole
   * input instead, and unset means no bound beyond the request's size.
   */
  maxTokens?: number | undefined;
  overflow: OverflowPolicy;
  threads: number;
  hypothesisTemplate?: string | undefined;
  calibration?: Partial<Calibration> | undefined;
}

export type LoadedModel =
  | { task: "text-generation"; generator: TextGenerator; session: ModelSession; notes: string[] }
  | {
      task: "zero-shot-classification";
      classifier: ZeroShotClassifier;
      session: ModelSession;
      notes: string[];
    }
  | {
      task: "entity-extraction";
      extractor: EntityExtractor;
      session: ModelSession;
      notes: string[];
    };

/** The task a folder holds, from its architecture or sentence-transformers files. */
export function inferTask(folder: ModelFolder): ModelTask {
  const architectures = (folder.config.architectures as string[] | undefined) ?? [];
  if (architectures.some((a) => /ForCausalLM|LMHeadModel/.test(a))) return "text-generation";
  if (architectures.some((a) => /ForTokenClassification/.test(a))) return "entity-extraction";
  if (architectures.some((a) => /ForSequenceClassification/.test(a))) {
    return "zero-shot-classification";
  }
  if (folder.modules) return "zero-shot-classification";
  throw modelLoadError(
    `${folder.path}: cannot tell the task from config.json architectures ${JSON.stringify(architectures)}; set --task`,
  );
}

export function inferZeroShotMethod(folder: ModelFolder): ZeroShotMethod {
  const id2label = folder.config.id2label as Record<string, string> | undefined;
  const isNli = Object.values(id2label ?? {}).some((l) => /^entail/i.test(String(l)));
  if (isNli) return "nli";
  if (folder.modules || folder.pooling) return "similarity";
  throw modelLoadError(
    `${folder.path}: not an NLI classifier (no entailment label) nor a sentence-transformers model (no modules.json)`,
  );
}

/** The longest sequence the model's position embeddings take. */
export function contextLengthOf(folder: ModelFolder): number {
  const fromConfig = configNumber(
    [folder.config],
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
  );
  const fromTokenizer = configNumber([folder.tokenizerConfig], "model_max_length");
  // sentence-transformers models are trained on shorter sequences than BERT allows.
  const fromSentence = configNumber([folder.sentenceConfig], "max_seq_length");
  const candidates = [fromConfig, fromTokenizer, fromSentence].filter(
    (n): n is number => n !== undefined && n > 0 && n < 1e7,
  );
  if (candidates.length === 0) {
    throw modelLoadError(
      `${folder.path}: config.json gives no context length (max_position_embeddings)`,
    );
  }
  return Math.min(...candidates);
}

function padIdOf(folder: ModelFolder, tokenizer: TextTokenizer): number {
  const fromConfig = configNumber([folder.config], "pad_token_id");
  if (fromConfig !== undefined) return fromConfig;
  const padToken = folder.tokenizerConfig.pad_token;
  const id = typeof padToken === "string" ? tokenizer.tokenId(padToken) : undefined;
  return id ?? 0;
}

export async function loadModel(options: LoadOptions): Promise<LoadedModel> {
  const folder = await readModelFolder(options.path, options.onnxFile);
  const task = options.task ?? inferTask(folder);
  const tokenizer = new TextTokenizer(folder.tokenizerJson, folder.tokenizerConfig);
  const contextLength = contextLengthOf(folder);
  const notes: string[] = [];
  let maxTokens = options.maxTokens ?? contextLength;
  if (maxTokens > contextLength && task !== "entity-extraction") {
    notes.push(
      `maxTokens ${maxTokens} is above the model's context of ${contextLength}; using ${contextLength}`,
    );
    maxTokens = contextLength;
  }

  let session: ModelSession;
  try {
    // A genai decoder is as fast and smaller without the arena (see SessionOptions).
    const genaiDecoder = task === "text-generation" && folder.genaiConfig !== null;
    session = await ModelSession.open(folder.onnxPath, {
      intraOpThreads: options.threads,
      cpuArena: !genaiDecoder,
    });
  } catch (error) {
    throw modelLoadError(
      `${folder.onnxPath}: onnxruntime cannot load the graph: ${String(error)}`,
      error,
    );
  }

  if (task === "text-generation") {
    const io = readDecoderIO(session.inputs, session.outputs, folder);
    const eosIds = eosIdsFrom(folder.generationConfig, folder.config);
    // A genai folder without transformers' configs still names its end of sequence.
    if (eosIds.size === 0) for (const id of io.eosIds) eosIds.add(id);
    if (eosIds.size === 0)
      notes.push("no eos_token_id in the model's configs: output ends only at a limit");
    const prompt = new PromptBuilder(tokenizer, folder.tokenizerConfig, folder.chatTemplate);
    const generator = new TextGenerator(session, io, tokenizer, prompt, eosIds, {
      maxTokens,
      policy: options.overflow,
    });
    return { task, generator, session, notes };
  }

  const hasTokenTypes = session.inputs.some((input) => input.name === "token_type_ids");
  const padId = padIdOf(folder, tokenizer);
  if (task === "entity-extraction") {
    // ---- The one branch point between the two extraction methods. ----
    // A GLiNER-layout graph takes `span_idx`: the span method.
    if (session.inputs.some((input) => input.name === "span_idx")) {
      // TODO(gl): build the span extractor (runtime/extract/span-extractor.ts) here.
      throw modelLoadError(`${folder.path}: span models: not yet`);
    }
    const extractor = tokenClassifierOf(folder, session, tokenizer, {
      contextLength,
      maxTokens: options.maxTokens ?? null,
      padId,
      hasTokenTypes,
    });
    return { task, extractor, session, notes };
  }

  const method = options.zeroShotMethod ?? inferZeroShotMethod(folder);
  const common = { maxTokens, policy: options.overflow, contextLength, padId, hasTokenTypes };
  if (method === "nli") {
    if (!session.outputs.some((output) => output.name === "logits")) {
      throw modelLoadError(`${folder.path}: an NLI classifier needs a 'logits' output`);
    }
    const classifier = new NliClassifier(session, tokenizer, {
      ...common,
      hypothesisTemplate: options.hypothesisTemplate ?? DEFAULT_NLI_TEMPLATE,
      labels: nliLabelsFrom(folder.config, folder.path),
    });
    return { task, classifier, session, notes };
  }
  const hidden = session.outputs.find((o) => o.name === "last_hidden_state") ?? session.outputs[0];
  if (!hidden || hidden.shape.length !== 3) {
    throw modelLoadError(
      `${folder.path}: a sentence-embedding model needs a [batch, seq, hidden] output`,
    );
  }
  const classifier = new SimilarityClassifier(session, tokenizer, {
    ...common,
    outputName: hidden.name,
    pooling: poolingFrom(folder.pooling),
    hypothesisTemplate: options.hypothesisTemplate ?? DEFAULT_SIMILARITY_TEMPLATE,
    calibration: options.calibration,
  });
  return { task, classifier, session, notes };
}

/** The token-classification extractor: labels from id2label, specials from the tokenizer's own template. */
function tokenClassifierOf(
  folder: ModelFolder,
  session: ModelSession,
  tokenizer: TextTokenizer,
  common: {
    contextLength: number;
    maxTokens: number | null;
    padId: number;
    hasTokenTypes: boolean;
  },
): TokenClassifier {
  const id2label = (folder.config.id2label ?? {}) as Record<string, unknown>;
  const labels: string[] = [];
  for (const [id, label] of Object.entries(id2label)) labels[Number(id)] = String(label);
  if (labels.length === 0 || labels.some((label) => label === undefined)) {
    throw modelLoadError(
      `${folder.path}: config.json id2label must name every class 0..n-1 of a token classifier`,
    );
  }
  const logits = session.outputs.find((output) => output.name === "logits");
  if (!logits || logits.shape.length !== 3) {
    throw modelLoadError(
      `${folder.path}: a token classifier needs a [batch, seq, labels] 'logits' output`,
    );
  }
  // Where the content sits among the special tokens the tokenizer adds.
  const bare = tokenizer.encode("a", { addSpecialTokens: false }).ids;
  const full = tokenizer.encode("a").ids;
  const at = full.indexOf(bare[0]!);
  if (bare.length !== 1 || at < 0) {
    throw modelLoadError(
      `${folder.path}: cannot find the tokenizer's special tokens around a sequence`,
    );
  }
  return new TokenClassifier(session, tokenizer, {
    ...common,
    labels,
    overlap: Math.min(DEFAULT_WINDOW_OVERLAP, Math.floor(common.contextLength / 4)),
    prefixIds: full.slice(0, at),
    suffixIds: full.slice(at + 1),
    normalizer: normalizerFlagsFrom(folder.tokenizerJson),
    maxRunTokens: DEFAULT_MAX_RUN_TOKENS,
  });
}
