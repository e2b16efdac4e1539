import { parseCandidateLabels } from "../../api/candidate-labels.js";
import { USECASES, type UsecaseName } from "../../api/entity-options.js";
import type { RoutableModel } from "../registry/registry.js";

/**
 * The most tokens, input and output together, a request can be billed: what
 * the allowance check asks the provider for and a token bucket reserves. It
 * must bound what the runtime bills, or a caller is served past its
 * allowance.
 *
 * One token per UTF-8 byte bounds any BPE or WordPiece tokenizer, so caller
 * text the gateway cannot tokenize is counted by its bytes:
 *
 * - Text generation: the model's limit, which the rendered conversation and
 *   the output share (the runtime gives the output only the room the input
 *   leaves). Without a limit: the input's and the instructions' bytes plus
 *   `max_output_tokens` (4096 when not given); for a continuation, whose
 *   stored turns are not read until after this check, the most bytes
 *   forwarded in their place (the body limit: gateway/routes/conversation.ts).
 * - Zero-shot classification: the input (the limit, or its bytes), plus every
 *   candidate label's hypothesis, which the runtime bills beside the input
 *   and which no limit bounds: the template's bytes with the label in it.
 * - Entity extraction: the input, plus the label prompt the runtime builds
 *   from the `metadata` options (their bytes, or a `usecase` preset's labels)
 *   and a marker token each.
 */
export interface BillableBody {
  input: string;
  instructions?: string | null;
  previous_response_id?: string | null;
  max_output_tokens?: number | null;
  categories?: readonly string[];
  metadata?: Readonly<Record<string, unknown>> | null;
}

/** Longer than either built-in hypothesis template ("This example is about {}."). */
const DEFAULT_TEMPLATE_BYTES = 32;
/** A classifier pair's or an extraction prompt's special tokens, generously. */
const SPECIALS = 4;

const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

export function mostTokens(
  body: BillableBody,
  model: Pick<RoutableModel, "maxTokens" | "task" | "hypothesisTemplate"> | null | undefined,
  forwardedMostBytes: number,
): number {
  const limit = model?.maxTokens;
  if (model?.task === "text-generation" && limit !== undefined) return limit;
  const output = body.max_output_tokens ?? (limit === undefined ? 4096 : 0);
  if (model?.task === "zero-shot-classification") {
    return (limit ?? bytes(body.input)) + hypothesesTokens(body, model.hypothesisTemplate) + output;
  }
  if (model?.task === "entity-extraction") {
    return (limit ?? bytes(body.input)) + promptTokens(body.metadata) + output;
  }
  if (typeof body.previous_response_id === "string") return forwardedMostBytes + output;
  return bytes(body.input) + bytes(body.instructions ?? "") + output;
}

function hypothesesTokens(body: BillableBody, template: string | undefined): number {
  // The runtime puts the label in for every `{}` of the template (replaceAll).
  const slots = template === undefined ? 1 : template.split("{}").length - 1;
  const templateBytes = template === undefined ? DEFAULT_TEMPLATE_BYTES : bytes(template);
  const labels = parseCandidateLabels({
    categories: body.categories,
    instructions: body.instructions,
  });
  return labels.reduce((sum, label) => sum + templateBytes + slots * bytes(label) + SPECIALS, 0);
}

/** The `metadata` options whose own text a label prompt is built from (api/responses-request.ts). */
const PROMPT_OPTIONS = ["schema", "labels"] as const;

function promptTokens(metadata: BillableBody["metadata"]): number {
  let sum = SPECIALS;
  for (const key of PROMPT_OPTIONS) {
    const value = metadata?.[key];
    // Each label gets a marker token and takes at least a byte and a comma:
    // two tokens a byte bound any split of the value into labels.
    if (typeof value === "string") sum += 2 * bytes(value) + SPECIALS;
  }
  // A preset names labels the request does not spell out: its own.
  const usecase = metadata?.usecase;
  if (typeof usecase === "string" && Object.hasOwn(USECASES, usecase)) {
    for (const label of USECASES[usecase as UsecaseName].spanLabels) sum += bytes(label) + 1;
  }
  return sum;
}
