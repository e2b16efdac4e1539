import { paramMessages } from "../api/param-messages.js";
import { defineError } from "../lib/coded-error.js";

/**
 * Every error the gateway answers with (the payment route's own are in
 * gateway/pay/pay-errors.ts). Codes are stable and listed in docs/errors.md.
 * Authentication failures never say which part of a credential was wrong.
 */
/** The header a request names its project in: the spec's, or the OpenAI clients'. */
export type ProjectHeader = "x-project-id" | "openai-project";

const noSuchModel = (model: string) =>
  `The model '${model}' does not exist or is not served on this route.`;

export const GatewayErrors = {
  modelNotFound: defineError("model_not_found", 400, "invalid_request_error", noSuchModel, () => ({
    param: "model",
  })),
  /** `GET /v1/models/{model}` for a model the key cannot call: a 404, as OpenAI's. */
  modelNotFoundById: defineError(
    "model_not_found",
    404,
    "invalid_request_error",
    noSuchModel,
    () => ({
      param: "model",
    }),
  ),
  /**
   * A stored response that is not the caller's to see: missing, another
   * caller's, deleted, expired or made with `store: false` all read alike.
   * `param` names the field that held the id (`previous_response_id`), or is
   * null for the id in a path.
   */
  responseNotFound: defineError(
    "response_not_found",
    404,
    "invalid_request_error",
    (id: string, _param: string | null) => `Response with id '${id}' not found.`,
    (_id, param) => ({ param }),
  ),
  /**
   * `after` on an input-items listing naming no item of the response: a 404
   * naming the cursor, as the Files and Batch listings answer an unknown one.
   */
  inputItemNotFound: defineError(
    "input_item_not_found",
    404,
    "invalid_request_error",
    (id: string) => `No input item '${id}' in this response.`,
    () => ({ param: "after" }),
  ),
  /**
   * `POST /v1/responses/{id}/cancel` on the caller's stored response. As the
   * OpenAI API, only a response made with `background: true` can be
   * cancelled, and the gateway answers every request in the foreground.
   */
  responseNotCancellable: defineError(
    "response_not_cancellable",
    400,
    "invalid_request_error",
    (id: string) =>
      `Response '${id}' cannot be cancelled: only a response created with background=true can be, and this service answers every request in the foreground, so it had already finished.`,
    () => ({ param: "response_id" }),
  ),
  /** `previous_response_id` on a model that does not hold conversations. */
  conversationUnsupported: defineError(
    "conversation_unsupported",
    400,
    "invalid_request_error",
    (model: string) =>
      `Model '${model}' does not continue conversations: previous_response_id is for text generation.`,
    () => ({ param: "previous_response_id" }),
  ),
  /**
   * A continuation over the body limit whose oldest turns may not be left
   * out (`truncation: disabled`, or a model with the `error` policy).
   */
  conversationTooLarge: defineError(
    "request_too_large",
    413,
    "invalid_request_error",
    (limitBytes: number) =>
      `The conversation previous_response_id continues, with this input, is larger than the limit of ${limitBytes} bytes a request may carry, and its oldest turns may not be left out (truncation is disabled, or the model answers 420 past its token limit). Start a new conversation, or continue this one with truncation "auto" on a model that truncates.`,
    () => ({ param: "previous_response_id" }),
  ),
  invalidApiKey: defineError(
    "invalid_api_key",
    401,
    "authentication_error",
    () =>
      "Missing or invalid API key. Send it in the x-api-key header, or as Authorization: Bearer <key>.",
  ),
  projectForbidden: defineError(
    "project_forbidden",
    403,
    "permission_error",
    (header: ProjectHeader = "x-project-id") =>
      `This API key may not use the project in ${header}.`,
    (header: ProjectHeader = "x-project-id") => ({ param: header }),
  ),
  /** A usage query parameter that is unknown, malformed or out of range; `param` names it. */
  invalidQuery: defineError(
    "invalid_query",
    400,
    "invalid_request_error",
    (message: string, _param: string) => message,
    (_message, param) => ({ param }),
  ),
  /** A query parameter given more than once where one value is read. */
  repeatedQuery: defineError(
    "invalid_query",
    400,
    "invalid_request_error",
    (param: string) => paramMessages.repeated(param),
    (param) => ({ param }),
  ),
  /** A member key asked for what only an admin key may read (another account's usage). */
  adminOnly: defineError(
    "admin_key_required",
    403,
    "permission_error",
    (param: string) => `Only an admin API key may use '${param}'.`,
    (param) => ({ param }),
  ),
  requestTimeout: defineError(
    "request_timeout",
    408,
    "server_error",
    (seconds: number) => `The model did not answer within ${seconds} s.`,
  ),
  rateLimited: defineError(
    "rate_limit_exceeded",
    429,
    "rate_limit_error",
    (retryAfter: number) => `Rate limit reached; retry after ${retryAfter} s.`,
    (retryAfter) => ({ retryAfterSeconds: retryAfter }),
  ),
  upstreamUnavailable: defineError(
    "upstream_unavailable",
    502,
    "server_error",
    (model: string) => `No runtime of model '${model}' accepted the connection.`,
  ),
  upstreamError: defineError(
    "upstream_error",
    502,
    "server_error",
    (model: string) => `The runtime of model '${model}' failed to answer.`,
  ),
  modelUnavailable: defineError(
    "model_unavailable",
    503,
    "server_error",
    (model: string) => `Model '${model}' has no ready runtime yet; retry shortly.`,
    () => ({ retryAfterSeconds: 1 }),
  ),
  /**
   * The store (PostgreSQL) cannot be reached or cannot take the work just
   * now: raised where it cannot be opened, and by the error edge for a store
   * call that failed so (gateway/store/store-unreachable.ts).
   */
  storeUnavailable: defineError(
    "store_unavailable",
    503,
    "server_error",
    () => "The store is unavailable; retry shortly.",
    () => ({ retryAfterSeconds: 1 }),
  ),
  /** The usage ledger's database cannot be reached (usage is still recorded: it waits in the journal). */
  usageUnavailable: defineError(
    "usage_unavailable",
    503,
    "server_error",
    () => "Usage cannot be read right now; retry shortly.",
    () => ({ retryAfterSeconds: 5 }),
  ),
} as const;
