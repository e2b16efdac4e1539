import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * The `pay-signature` scheme of the payment route (spec section 5.2):
 * `t=<unix-seconds>,kid=<key-id>,v1=<hex>[,v1=<hex>...]`, where each `v1` is
 * HMAC-SHA256 over the raw request bytes, keyed by a secret selected by `kid`.
 *
 * Everything here is pure: the caller hands in the header, the exact bytes it
 * received, the configured secrets and the clock, and maps the result to a
 * status (see `pay-errors.ts`). docs/payment-provider.md describes the scheme.
 */

export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * Bounds on what we are willing to parse. A real header is ~120 bytes; the
 * limits keep a hostile header from costing more than a few HMAC comparisons.
 */
const MAX_HEADER_LENGTH = 2048;
const MAX_V1_VALUES = 8;

// Only visible ASCII without spaces: no whitespace, no CR/LF (log injection), no
// quoting. Anything outside this set makes the whole header malformed.
const KID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
// Decimal seconds without sign, fraction or leading zeros: one spelling per instant.
const TIMESTAMP_PATTERN = /^(?:0|[1-9][0-9]{0,11})$/;
// Alphanumerics only. A non-hex, uppercase or wrong-length value is still *well
// formed*: it simply cannot equal the lowercase hex digest we compare against, so
// it is a mismatch rather than a parse error (one spelling per digest, as Stripe).
const V1_PATTERN = /^[A-Za-z0-9]{1,128}$/;

export interface ParsedPaySignature {
  readonly timestamp: number;
  readonly kid: string;
  readonly v1: readonly string[];
}

export type ParsePaySignatureResult =
  | { readonly ok: true; readonly signature: ParsedPaySignature }
  | { readonly ok: false; readonly reason: "missing" | "malformed" };

export type PaySignatureFailureReason =
  "missing" | "malformed" | "unknown_kid" | "mismatch" | "not_configured";

export type VerifyPaySignatureResult =
  | { readonly ok: true; readonly kid: string; readonly timestamp: number }
  | { readonly ok: false; readonly reason: PaySignatureFailureReason }
  | { readonly ok: false; readonly reason: "stale"; readonly timestamp: number };

export interface VerifyPaySignatureInput {
  /**
   * The header as Node hands it over. Node joins repeated custom headers with
   * ", ", which contains a space and so parses as malformed; an array (from a
   * raw header list) of more than one value is malformed for the same reason.
   */
  readonly header: string | readonly string[] | undefined;
  /** The request body exactly as received, before any JSON parsing. */
  readonly rawBody: Buffer;
  /** kid -> its secrets, newest first or in any order: each is tried (rotation). */
  readonly secrets: ReadonlyMap<string, readonly string[]>;
  readonly nowSeconds: number;
  readonly toleranceSeconds?: number;
}

const MALFORMED = { ok: false, reason: "malformed" } as const;

export function parsePaySignature(
  header: string | readonly string[] | undefined,
): ParsePaySignatureResult {
  if (typeof header !== "string") {
    if (header === undefined || header.length === 0) return { ok: false, reason: "missing" };
    if (header.length > 1) return MALFORMED;
    header = header[0]!;
  }
  if (header === "") return { ok: false, reason: "missing" };
  if (header.length > MAX_HEADER_LENGTH) return MALFORMED;

  let timestamp: number | undefined;
  let kid: string | undefined;
  const v1: string[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq <= 0) return MALFORMED;
    const key = part.slice(0, eq);
    const value = part.slice(eq + 1);
    switch (key) {
      case "t":
        if (timestamp !== undefined || !TIMESTAMP_PATTERN.test(value)) return MALFORMED;
        timestamp = Number(value);
        break;
      case "kid":
        if (kid !== undefined || !KID_PATTERN.test(value)) return MALFORMED;
        kid = value;
        break;
      case "v1":
        if (!V1_PATTERN.test(value) || v1.length === MAX_V1_VALUES) return MALFORMED;
        v1.push(value);
        break;
      default:
        // Unknown keys are refused rather than skipped: a future `v2` must be a
        // deliberate change on both sides, not something we silently ignore.
        return MALFORMED;
    }
  }
  if (timestamp === undefined || kid === undefined || v1.length === 0) return MALFORMED;
  return { ok: true, signature: { timestamp, kid, v1 } };
}

export function verifyPaySignature(input: VerifyPaySignatureInput): VerifyPaySignatureResult {
  // Checked first because it is the one failure an operator can fix, and it
  // should be what the logs say even when a caller also sent a bad header.
  if (!hasAnySecret(input.secrets)) return { ok: false, reason: "not_configured" };

  const parsed = parsePaySignature(input.header);
  if (!parsed.ok) return parsed;
  const { kid, timestamp, v1 } = parsed.signature;

  const secrets = (input.secrets.get(kid) ?? []).filter((secret) => secret.length > 0);
  if (secrets.length === 0) return { ok: false, reason: "unknown_kid" };

  const candidates = v1.map((value) => Buffer.from(value, "latin1"));
  let matched = false;
  for (const secret of secrets) {
    const expected = Buffer.from(signPayload(input.rawBody, secret), "latin1");
    for (const candidate of candidates) {
      // No early exit: every configured secret and every v1 costs the same work,
      // so timing says nothing about which one matched.
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) {
        matched = true;
      }
    }
  }
  if (!matched) return { ok: false, reason: "mismatch" };

  // Only a genuine signature gets to learn that its timestamp is the problem:
  // a forged request is a 401 whatever its `t`.
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (Math.abs(input.nowSeconds - timestamp) > tolerance) {
    return { ok: false, reason: "stale", timestamp };
  }
  return { ok: true, kid, timestamp };
}

function hasAnySecret(secrets: ReadonlyMap<string, readonly string[]>): boolean {
  for (const list of secrets.values()) {
    if (list.some((secret) => secret.length > 0)) return true;
  }
  return false;
}

/** HMAC-SHA256 of the body bytes, lowercase hex. The timestamp is not part of the input. */
export function signPayload(rawBody: Buffer | string, secret: string): string {
  return createHmac("sha256", secret).update(rawBody).digest("hex");
}

export interface PaySignatureParts {
  readonly t: number;
  readonly kid: string;
  readonly v1: readonly string[];
}

/** Builds the header the payment provider sends; used by the stand-in and tests. */
export function formatPaySignature(parts: PaySignatureParts): string {
  return [`t=${parts.t}`, `kid=${parts.kid}`, ...parts.v1.map((value) => `v1=${value}`)].join(",");
}
