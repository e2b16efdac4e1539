import { randomHex } from "../lib/random-hex.js";
import { z } from "zod";
import { entityAnnotationSchema, type EntityAnnotation } from "./entity-answer.js";
import {
  MAX_OUTPUT_TOKENS_CAP,
  echoedMetadata,
  type ResponsesRequest,
} from "./responses-request.js";

/** ResponsesResponse of spec section 2.2, plus `incomplete` as the Responses API has it. */

export const responsesErrorSchema = z.object({
  message: z.string(),
  type: z.string().optional(),
  param: z.string().nullable().optional(),
  code: z.string().optional(),
});
export type ResponsesError = z.infer<typeof responsesErrorSchema>;

export const responsesUsageSchema = z.object({
  input_tokens: z.number().int(),
  input_tokens_details: z.object({ cached_tokens: z.number().int() }),
  output_tokens: z.number().int(),
  output_tokens_details: z.object({ reasoning_tokens: z.number().int() }),
  total_tokens: z.number().int(),
});
export type ResponsesUsage = z.infer<typeof responsesUsageSchema>;

export const outputMessageSchema = z.object({
  type: z.literal("message"),
  id: z.string(),
  status: z.enum(["completed", "incomplete"]),
  role: z.literal("assistant"),
  content: z.array(
    z.object({
      type: z.literal("output_text"),
      text: z.string(),
      /** Empty but for entity extraction, whose entities are annotations of the text. */
      annotations: z.array(entityAnnotationSchema),
    }),
  ),
});

export const responseStatusSchema = z.enum(["completed", "incomplete", "failed"]);
export type ResponseStatus = z.infer<typeof responseStatusSchema>;

export const responsesResponseSchema = z.object({
  id: z.string(),
  object: z.literal("response"),
  created_at: z.number().int(),
  status: responseStatusSchema,
  completed_at: z.number().int().nullable(),
  error: responsesErrorSchema.nullable(),
  incomplete_details: z.object({ reason: z.string() }).nullable(),
  instructions: z.string().nullable(),
  max_output_tokens: z.number().int().min(1).max(MAX_OUTPUT_TOKENS_CAP).nullable(),
  model: z.string(),
  output: z.array(outputMessageSchema),
  parallel_tool_calls: z.boolean(),
  previous_response_id: z.string().nullable(),
  reasoning: z.object({ effort: z.string().nullable(), summary: z.string().nullable() }),
  store: z.boolean(),
  temperature: z.number().nullable(),
  text: z.object({ format: z.object({ type: z.string() }) }),
  tool_choice: z.string(),
  tools: z.array(z.unknown()),
  top_p: z.number().nullable(),
  truncation: z.enum(["auto", "disabled"]),
  usage: responsesUsageSchema.nullable(),
  user: z.string().nullable(),
  metadata: z.record(z.string(), z.string()),
});
export type ResponsesResponse = z.infer<typeof responsesResponseSchema>;

/** Ids as the Responses API shapes them: a type prefix and 48 hex digits. */
export function newId(prefix: "resp" | "msg"): string {
  return `${prefix}_${randomHex(24)}`;
}

export function usageOf(
  inputTokens: number,
  outputTokens: number,
  cachedTokens = 0,
): ResponsesUsage {
  return {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: cachedTokens },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + outputTokens,
  };
}

/** The request settings a response echoes, with the spec's defaults. */
type Echo = Pick<
  ResponsesResponse,
  | "instructions"
  | "max_output_tokens"
  | "model"
  | "parallel_tool_calls"
  | "previous_response_id"
  | "store"
  | "temperature"
  | "top_p"
  | "truncation"
  | "metadata"
>;

/**
 * Echoes only well-typed settings: a failed envelope for a bad body must not
 * repeat the bad value in a field whose type the response promises.
 */
function echoOf(request: Partial<Record<keyof ResponsesRequest, unknown>>): Echo {
  const str = (v: unknown) => (typeof v === "string" ? v : null);
  const num = (v: unknown) => (typeof v === "number" ? v : null);
  const maxOutput = num(request.max_output_tokens);
  const bool = (v: unknown, fallback: boolean) => (typeof v === "boolean" ? v : fallback);
  const metadata =
    typeof request.metadata === "object" && request.metadata !== null
      ? (request.metadata as Record<string, unknown>)
      : undefined;
  return {
    instructions: str(request.instructions),
    // Only a value the request schema accepts is echoed: the response declares the same bounds.
    max_output_tokens:
      maxOutput !== null &&
      Number.isInteger(maxOutput) &&
      maxOutput >= 1 &&
      maxOutput <= MAX_OUTPUT_TOKENS_CAP
        ? maxOutput
        : null,
    model: str(request.model) ?? "",
    parallel_tool_calls: bool(request.parallel_tool_calls, true),
    previous_response_id: str(request.previous_response_id),
    store: bool(request.store, true),
    temperature: num(request.temperature),
    top_p: num(request.top_p),
    truncation: request.truncation === "disabled" ? "disabled" : "auto",
    metadata: echoedMetadata(metadata),
  };
}

function envelope(
  request: Partial<Record<keyof ResponsesRequest, unknown>>,
  createdAt: number,
  id: string,
): Omit<
  ResponsesResponse,
  "status" | "completed_at" | "error" | "incomplete_details" | "output" | "usage"
> {
  return {
    id,
    object: "response",
    created_at: createdAt,
    ...echoOf(request),
    reasoning: { effort: null, summary: null },
    text: { format: { type: "text" } },
    // The only choices a request may make (responses-request.ts), echoed.
    tool_choice: request.tool_choice === "none" ? "none" : "auto",
    tools: [],
    // Not a field of spec 2.1 but one the OpenAI clients send (an end
    // user's id); echoed as the OpenAI API echoes it.
    user:
      typeof (request as { user?: unknown }).user === "string"
        ? (request as { user: string }).user
        : null,
  };
}

export interface CompletedGeneration {
  text: string;
  inputTokens: number;
  /** Of the input tokens, those read from a prefix cache (usage.input_tokens_details.cached_tokens). */
  cachedTokens?: number;
  outputTokens: number;
  /** Set when generation stopped before its natural end. */
  incompleteReason: "max_output_tokens" | null;
  createdAt: number;
  completedAt: number;
  /** Entity extraction's entities; none for generation. */
  annotations?: EntityAnnotation[];
}

/** `id`: the response id the gateway minted (RESPONSE_ID_HEADER), else a new one. */
export function completedResponse(
  request: ResponsesRequest,
  result: CompletedGeneration,
  id: string = newId("resp"),
): ResponsesResponse {
  const status = result.incompleteReason ? "incomplete" : "completed";
  return {
    ...envelope(request, result.createdAt, id),
    status,
    completed_at: status === "completed" ? result.completedAt : null,
    error: null,
    incomplete_details: result.incompleteReason ? { reason: result.incompleteReason } : null,
    output: [
      {
        type: "message",
        id: newId("msg"),
        status,
        role: "assistant",
        content: [
          { type: "output_text", text: result.text, annotations: result.annotations ?? [] },
        ],
      },
    ],
    usage: usageOf(result.inputTokens, result.outputTokens, result.cachedTokens),
  };
}

/** The failed Responses envelope of spec section 7 (400, 420). */
export function failedResponse(
  request: Partial<Record<keyof ResponsesRequest, unknown>>,
  error: ResponsesError,
  createdAt: number,
  id: string = newId("resp"),
): ResponsesResponse {
  return {
    ...envelope(request, createdAt, id),
    status: "failed",
    completed_at: null,
    error,
    incomplete_details: null,
    output: [],
    usage: null,
  };
}
