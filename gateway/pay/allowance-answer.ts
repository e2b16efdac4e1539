/**
 * What an allowance-check answer means, apart from the I/O that fetched it:
 * a pure function from status and bytes to allowed, denied or unavailable.
 * The table it implements is in docs/payment-provider.md.
 */

/** A closed set, so it can label a metric without growing its cardinality. */
export type UnavailableReason =
  | "timeout"
  | "connection_error"
  | "server_error"
  | "credential_rejected"
  | "unexpected_status"
  | "bad_answer"
  /** The caller's own signal fired (client gone, shutdown): no verdict was reached. */
  | "aborted";

export interface ProviderDenial {
  readonly kind: "denied";
  readonly status: 402;
  /** The denial as parsed JSON, for logs and decisions. */
  readonly body: unknown;
  /** The exact bytes to send back to the client (always a JSON document). */
  readonly raw: Buffer;
}

export type AllowanceResult =
  | { readonly kind: "allowed" }
  | ProviderDenial
  | {
      readonly kind: "unavailable";
      readonly reason: UnavailableReason;
      readonly detail: string;
      readonly status?: number;
    };

/** Used when a 402 carries no JSON: the client still gets a JSON PaymentRequiredError. */
const FALLBACK_DENIAL = { error: "payment_required" } as const;

export interface ProviderAnswer {
  readonly status: number;
  /** Empty when the body ran past the size cap. */
  readonly raw: Buffer;
  /** The body ran past the size cap and was not read. */
  readonly oversized?: boolean;
}

/** The whole mapping; the client calls it on every answer it reads. */
export function interpretAllowance(answer: ProviderAnswer): AllowanceResult {
  const { status, raw } = answer;
  if (status === 402) {
    const parsed = parseJson(raw);
    // An explicit 402 is a denial even when its body is garbage: failing open
    // on it would serve exactly the callers the provider refused.
    if (isObject(parsed)) return { kind: "denied", status: 402, body: parsed, raw };
    return {
      kind: "denied",
      status: 402,
      body: FALLBACK_DENIAL,
      raw: Buffer.from(JSON.stringify(FALLBACK_DENIAL)),
    };
  }
  if (status === 200) {
    const parsed = parseJson(raw);
    if (isObject(parsed) && parsed.allowed === true) return { kind: "allowed" };
    if (isObject(parsed) && parsed.allowed === false) {
      return { kind: "denied", status: 402, body: parsed, raw };
    }
    return {
      kind: "unavailable",
      reason: "bad_answer",
      detail: answer.oversized
        ? "200 with a body over the size cap"
        : "200 without a boolean `allowed`",
      status,
    };
  }
  if (status >= 500) {
    return { kind: "unavailable", reason: "server_error", detail: `answered ${status}`, status };
  }
  if (status === 401 || status === 403) {
    return {
      kind: "unavailable",
      reason: "credential_rejected",
      detail: `answered ${status}`,
      status,
    };
  }
  return { kind: "unavailable", reason: "unexpected_status", detail: `answered ${status}`, status };
}

function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
