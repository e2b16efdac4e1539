/**
 * The wire contract between the gateway and a runtime, beyond the request
 * body they share: the headers each side sets for the other. Declared once
 * here and imported by both, so neither can rename one alone.
 */

/**
 * Usage travels in response headers on every answer of a runtime, so the
 * gateway can meter the classifier's bare label-to-score object as well as a
 * Responses object.
 */
export const USAGE_HEADERS = {
  input: "x-modelgate-input-tokens",
  output: "x-modelgate-output-tokens",
  /** Of the input tokens, those read from the prefix cache (absent: none). */
  cached: "x-modelgate-cached-tokens",
} as const;

/**
 * The response id the gateway mints for every request and sends to the
 * runtime, which uses it as the Responses object's `id`. Usage records and
 * settlements are keyed by it: an id the caller cannot choose, so one served
 * request is one record whatever `x-request-id` callers send.
 */
export const RESPONSE_ID_HEADER = "x-modelgate-response-id";

/**
 * Set by the gateway's batch workers (`batch`) on what they send to a
 * runtime: the runtime admits such requests only behind interactive ones.
 * Callers cannot set it: the gateway builds the headers it forwards itself.
 */
export const PRIORITY_HEADER = "x-modelgate-priority";

/**
 * On a runtime's answer to a batch request, the interactive pressure as it
 * answered: 0 with no interactive traffic (none running, waiting, nor
 * arrived within the last 250 ms); 1 with some but none waiting; 1 + the
 * number of interactive requests waiting for a step otherwise. The batch
 * workers keep their share of spare room at 1 and back off above it
 * (gateway/batch/batch-pacer.ts).
 */
export const INTERACTIVE_LOAD_HEADER = "x-modelgate-interactive-load";

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Of the input tokens, those the runtime read from its prefix cache; absent from an older runtime. */
  cachedTokens?: number | undefined;
}

const RESPONSE_ID = /^resp_[0-9a-f]{48}$/;

/** A response id as the gateway mints them; anything else in the header is ignored. */
export function isResponseId(value: unknown): value is string {
  return typeof value === "string" && RESPONSE_ID.test(value);
}

function count(value: string | string[] | undefined): number | null {
  if (typeof value !== "string" || !/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}

/** The usage a runtime reported, or null when its headers do not carry it. */
export function usageFromHeaders(
  headers: Readonly<Record<string, string | string[] | undefined>>,
): Usage | null {
  const inputTokens = count(headers[USAGE_HEADERS.input]);
  const outputTokens = count(headers[USAGE_HEADERS.output]);
  if (inputTokens === null || outputTokens === null) return null;
  const cachedTokens = count(headers[USAGE_HEADERS.cached]);
  return cachedTokens === null
    ? { inputTokens, outputTokens }
    : { inputTokens, outputTokens, cachedTokens };
}

/**
 * The largest body a runtime takes. Only the gateway and its batch workers
 * call a runtime, and they bound what they send by the gateway's own body
 * limit (`--body-limit-bytes`, at most this), a continued conversation
 * included; this is the ceiling that setting may be raised to.
 */
export const RUNTIME_BODY_LIMIT_BYTES = 16 * 1024 * 1024;
