import { defineError, type CodedError } from "../lib/coded-error.js";

/**
 * Every error the runtime answers with. Codes are stable and listed in
 * docs/errors.md; a retired code is never reused.
 */
export const RuntimeErrors = {
  modelNotFound: defineError(
    "model_not_found",
    400,
    "invalid_request_error",
    (model: string, served: string) =>
      `The model '${model}' does not exist here; this runtime serves '${served}'.`,
    () => ({ param: "model" }),
  ),
  contextLengthExceeded: defineError(
    "context_length_exceeded",
    420,
    "invalid_request_error",
    (tokens: number, limit: number) =>
      `The input is ${tokens} tokens; this model takes at most ${limit}. Shorten the input.`,
    () => ({ param: "input" }),
  ),
  overloaded: defineError(
    "rate_limit_exceeded",
    429,
    "rate_limit_error",
    (retryAfter: number) => `The model is at capacity; retry after ${retryAfter} s.`,
    (retryAfter) => ({ retryAfterSeconds: retryAfter }),
  ),
  clientClosed: defineError(
    "client_closed_request",
    499,
    "invalid_request_error",
    (_cause?: unknown) =>
      "The client closed the connection while the request waited for the model.",
    (cause?: unknown) => ({ cause }),
  ),
  notReady: defineError(
    "model_not_ready",
    503,
    "server_error",
    () => "The model is still loading; retry shortly.",
    () => ({ retryAfterSeconds: 1 }),
  ),
  modelLoad: defineError(
    "model_load_failed",
    500,
    "server_error",
    (message: string, _cause?: unknown) => message,
    (_message, cause) => ({ cause }),
  ),
} as const;

export function modelLoadError(message: string, cause?: unknown): CodedError {
  return RuntimeErrors.modelLoad(message, cause);
}
