import { env, pipeline, type TokenClassificationPipeline } from "@huggingface/transformers";
import type { InferenceSession } from "onnxruntime-node";

/**
 * transformers.js' token-classification pipeline as the reference (and the
 * benchmark's peer) for entity extraction. Version 4.3.1 offers two
 * aggregation strategies, `none` (one prediction per token) and `simple`
 * (BIO tags only), and neither gives character offsets (its source says
 * "TODO: Add support for start and end"). `simple` joins an `I-` piece to
 * the open entity but starts a new one at every `B-`, and this model tags
 * most word pieces `B-` ("74" "##2", "john" "@" "example"), so `simple`
 * answers a building number or an e-mail address in pieces; it also drops
 * `O` tokens before grouping, so two pieces with an `O` between them join.
 *
 * So the reference takes the pipeline's per-token output (`none`, with no
 * label ignored), places each piece in the input by its own text, and
 * applies the documented aggregation itself (`aggregateEntities`): a piece
 * continues the open entity when it has the same entity type and either is
 * tagged `I-` or touches the previous piece (no character between them:
 * the same whitespace-delimited word, so "john@example.com" is one e-mail
 * and "74" "##2" one building number). The entity's score is the mean of
 * its pieces' scores, as in `simple`.
 */
export interface TokenPrediction {
  /** The BIO label with the highest score, such as `B-EMAIL` or `O`. */
  label: string;
  score: number;
  /** Character offsets into the input, end exclusive. */
  start: number;
  end: number;
}

export interface ReferenceEntity {
  /** The entity type without its BIO prefix, such as `EMAIL`. */
  label: string;
  start: number;
  end: number;
  score: number;
  text: string;
}

interface RawToken {
  entity: string;
  score: number;
  index: number;
  word: string;
}

/**
 * The text BERT's normaliser makes of one input character (lower-cased,
 * accents stripped: the tokenizer's `strip_accents` follows `lowercase`).
 */
function normalizedChar(char: string): string {
  return char
    .normalize("NFD")
    .replace(/\p{Mn}/gu, "")
    .toLowerCase();
}

/**
 * Places word pieces in the text they came from, in order: each piece
 * (without its `##` prefix) must match the normalised characters at the
 * current position, after whitespace. A piece that does not match (an
 * `[UNK]`, a character the normaliser drops) is an error, not a guess: the
 * test sentences are chosen so that every piece places.
 */
export function placePieces(
  text: string,
  pieces: readonly string[],
): Array<{ start: number; end: number }> {
  const chars = Array.from(text);
  // Code-point index to UTF-16 offset, since the runtime reports JavaScript string offsets.
  const offsets: number[] = [];
  let offset = 0;
  for (const char of chars) {
    offsets.push(offset);
    offset += char.length;
  }
  offsets.push(offset);
  let at = 0;
  return pieces.map((piece) => {
    const wanted = piece.startsWith("##") ? piece.slice(2) : piece;
    while (at < chars.length && /\s/u.test(chars[at]!)) at++;
    const start = at;
    let matched = "";
    while (matched.length < wanted.length && at < chars.length) {
      matched += normalizedChar(chars[at]!);
      at++;
    }
    if (matched !== wanted) {
      throw new Error(
        `piece ${JSON.stringify(piece)} does not match ${JSON.stringify(text.slice(offsets[start], offsets[at]))} at ${offsets[start]}`,
      );
    }
    return { start: offsets[start]!, end: offsets[at]! };
  });
}

/** `B-EMAIL` → ["B", "EMAIL"]; `O` → ["O", ""]. */
function splitLabel(label: string): [prefix: string, type: string] {
  if (label === "O") return ["O", ""];
  const match = /^([BI])-(.+)$/.exec(label);
  if (!match) throw new Error(`label ${label} is not BIO`);
  return [match[1]!, match[2]!];
}

/** The documented aggregation (see the module comment), over every piece in order. */
export function aggregateEntities(
  text: string,
  tokens: readonly TokenPrediction[],
): ReferenceEntity[] {
  const entities: ReferenceEntity[] = [];
  let open: { label: string; start: number; end: number; scores: number[] } | null = null;
  const close = () => {
    if (!open) return;
    const score = open.scores.reduce((a, b) => a + b, 0) / open.scores.length;
    entities.push({
      label: open.label,
      start: open.start,
      end: open.end,
      score,
      text: text.slice(open.start, open.end),
    });
    open = null;
  };
  for (const token of tokens) {
    const [prefix, type] = splitLabel(token.label);
    if (prefix === "O") {
      close();
      continue;
    }
    const current = open as { label: string; end: number; scores: number[] } | null;
    if (current && current.label === type && (prefix === "I" || token.start === current.end)) {
      current.end = token.end;
      current.scores.push(token.score);
      continue;
    }
    close();
    open = { label: type, start: token.start, end: token.end, scores: [token.score] };
  }
  close();
  return entities;
}

export interface ReferenceOptions {
  /** Session options for the pipeline's ONNX session (the benchmark passes the runtime's). */
  sessionOptions?: InferenceSession.SessionOptions;
}

export class ReferenceTokenClassifier {
  private constructor(private readonly classifier: TokenClassificationPipeline) {}

  /** Offline: `modelsDir` is the only place the pipeline may read from. */
  static async load(
    modelsDir: string,
    name: string,
    options: ReferenceOptions = {},
  ): Promise<ReferenceTokenClassifier> {
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    env.localModelPath = modelsDir;
    const classifier = await pipeline("token-classification", name, {
      // rampart-pii ships onnx/model_q4.onnx only.
      dtype: "q4",
      ...(options.sessionOptions ? { session_options: options.sessionOptions } : {}),
    });
    return new ReferenceTokenClassifier(classifier);
  }

  /** Every non-special token's top label and score, placed in the text. */
  async tokens(text: string): Promise<TokenPrediction[]> {
    // No label ignored: `O` pieces close entities and are needed to place the others.
    const raw = (await this.classifier(text, { ignore_labels: [] })) as unknown as RawToken[];
    const places = placePieces(
      text,
      raw.map((t) => t.word),
    );
    return raw.map((t, i) => ({ label: t.entity, score: t.score, ...places[i]! }));
  }

  /** The pipeline's tokens, aggregated into entities with character offsets. */
  async entities(text: string): Promise<ReferenceEntity[]> {
    return aggregateEntities(text, await this.tokens(text));
  }

  async dispose(): Promise<void> {
    await this.classifier.dispose();
  }
}
