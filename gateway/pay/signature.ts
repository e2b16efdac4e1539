import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/**
 * The `pay-signature` scheme of the payment route (spec section 5.2):
 * `t=<unix-seconds>,kid=<key-id>,v1=<hex>[,v1=<hex>...]`, where each `v1` is
 * HMAC-SHA256 over the raw request bytes, keyed by a secret selected by `kid`.
 * Optionally `v2=<hex>` values, HMAC-SHA256 over `<t>.<raw bytes>` (as Stripe
 * signs), which authenticate the timestamp too; a header with a `v2` is
 * verified by its `v2` values alone, so a rewritten `t` fails.
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
const MAX_DIGEST_VALUES = 8;

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
  readonly v2: readonly string[];
}

export type ParsePaySignatureResult =
  | { readonly ok: true; readonly signature: ParsedPaySignature }
  | { readonly ok: false; readonly reason: "missing" | "malformed" };

export type PaySignatureFailureReason =
  "missing" | "malformed" | "unknown_kid" | "mismatch" | "not_configured";

/** A signature that verified: what the provider signed, for the settlement and the replay memory. */
export interface VerifiedPaySignature {
  readonly kid: string;
  readonly timestamp: number;
  /** The scheme that verified: `v2` authenticates the timestamp, `v1` does not. */
  readonly scheme: "v1" | "v2";
  /** The matching digest, as the provider issued it (lowercase hex). */
  readonly digest: string;
}

export type VerifyPaySignatureResult =
  | ({ readonly ok: true } & VerifiedPaySignature)
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
  const v2: string[] = [];
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
      case "v2": {
        const values = key === "v1" ? v1 : v2;
        if (!V1_PATTERN.test(value) || values.length === MAX_DIGEST_VALUES) return MALFORMED;
        values.push(value);
        break;
      }
      default:
        // Unknown keys are refused rather than skipped: a future scheme must be
        // a deliberate change on both sides, not something we silently ignore.
        return MALFORMED;
    }
  }
  if (timestamp === undefined || kid === undefined || v1.length + v2.length === 0) {
    return MALFORMED;
  }
  return { ok: true, signature: { timestamp, kid, v1, v2 } };
}

export function verifyPaySignature(input: VerifyPaySignatureInput): VerifyPaySignatureResult {
  // Checked first because it is the one failure an operator can fix, and it
  // should be what the logs say even when a caller also sent a bad header.
  if (!hasAnySecret(input.secrets)) return { ok: false, reason: "not_configured" };

  const parsed = parsePaySignature(input.header);
  if (!parsed.ok) return parsed;
  const { kid, timestamp, v1, v2 } = parsed.signature;

  const secrets = (input.secrets.get(kid) ?? []).filter((secret) => secret.length > 0);
  if (secrets.length === 0) return { ok: false, reason: "unknown_kid" };

  // A header with v2 values is judged by them alone: accepting its v1 as well
  // would let a rewritten `t` through on the v1 that does not cover it.
  const scheme = v2.length > 0 ? "v2" : "v1";
  const values = scheme === "v2" ? v2 : v1;
  const candidates = values.map((value) => Buffer.from(value, "latin1"));
  let digest: string | undefined;
  for (const secret of secrets) {
    const expectedHex =
      scheme === "v2"
        ? signPayloadV2(input.rawBody, timestamp, secret)
        : signPayload(input.rawBody, secret);
    const expected = Buffer.from(expectedHex, "latin1");
    for (let i = 0; i < candidates.length; i++) {
      const candidate = candidates[i]!;
      // No early exit: every configured secret and every value costs the same
      // work, so timing says nothing about which one matched.
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) {
        digest ??= values[i]!;
      }
    }
  }
  if (digest === undefined) return { ok: false, reason: "mismatch" };

  // Only a genuine signature gets to learn that its timestamp is the problem:
  // a forged request is a 401 whatever its `t`.
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (Math.abs(input.nowSeconds - timestamp) > tolerance) {
    return { ok: false, reason: "stale", timestamp };
  }
  return { ok: true, kid, timestamp, scheme, digest };
}

function hasAnySecret(secrets: ReadonlyMap<string, readonly string[]>): boolean {
  for (const list of secrets.values()) {
    if (list.some((secret) => secret.length > 0)) return true;
  }
  return false;
}

/** `v1`: HMAC-SHA256 of the body bytes, lowercase hex. The timestamp is not part of the input. */
export function signPayload(rawBody: Buffer | string, secret: string): string {
  return createHmac("sha256", secret).update(rawBody).digest("hex");
}

/** `v2`: HMAC-SHA256 of `<t>.<body bytes>`, lowercase hex: the timestamp is signed too. */
export function signPayloadV2(rawBody: Buffer | string, t: number, secret: string): string {
  return createHmac("sha256", secret).update(`${t}.`).update(rawBody).digest("hex");
}

/**
 * What makes one signature the same as another for the replay memory: its
 * timestamp, its kid and the exact bytes it signs (which every matching v1 or
 * v2 of the header authenticates). Adding, dropping or reordering digests of
 * the header, or changing any unsigned header, does not make a new signature.
 * 128 bits of SHA-256, base64url: ample against collisions, small in memory.
 */
export function signatureIdentity(timestamp: number, kid: string, rawBody: Buffer): string {
  return createHash("sha256")
    .update(`${timestamp},${kid},`)
    .update(rawBody)
    .digest()
    .toString("base64url", 0, 16);
}

export interface PaySignatureParts {
  readonly t: number;
  readonly kid: string;
  readonly v1?: readonly string[];
  readonly v2?: readonly string[];
}

/** Builds the header the payment provider sends; used by the stand-in and tests. */
export function formatPaySignature(parts: PaySignatureParts): string {
  return [
    `t=${parts.t}`,
    `kid=${parts.kid}`,
    ...(parts.v1 ?? []).map((value) => `v1=${value}`),
    ...(parts.v2 ?? []).map((value) => `v2=${value}`),
  ].join(",");
}
