import { parseDictionary, serializeDictionary, type BareItem } from "structured-headers";

/**
 * The `pay-usage` response header (spec section 4.2): what the request is
 * settled for, as an RFC 8941 dictionary, e.g.
 *
 *   pay-usage: slug="tiny-gpt", input_tokens=12, output_tokens=34
 *
 * A structured field rather than ad-hoc text so that the provider, clients
 * and our tests share one well-specified grammar (quoting, integer range,
 * member order) instead of each inventing a parser.
 */

export const PAY_USAGE_HEADER = "pay-usage";

export interface PayUsage {
  /** The model's service slug from its pricing: what the provider prices by. */
  readonly slug: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** RFC 8941 integers have at most 15 digits. */
const MAX_SF_INTEGER = 999_999_999_999_999;
/** sf-string allows visible ASCII and space; a slug needs neither quotes nor spaces. */
const SLUG_PATTERN = /^[\x21-\x7e]{1,128}$/;

export function formatPayUsage(usage: PayUsage): string {
  if (!SLUG_PATTERN.test(usage.slug)) {
    throw new RangeError("pay-usage: slug must be 1-128 visible ASCII characters");
  }
  assertCount("input_tokens", usage.inputTokens);
  assertCount("output_tokens", usage.outputTokens);
  // Member order is part of the documented form, and a Map keeps it.
  return serializeDictionary(
    new Map<string, [BareItem, Map<string, BareItem>]>([
      ["slug", [usage.slug, new Map()]],
      ["input_tokens", [usage.inputTokens, new Map()]],
      ["output_tokens", [usage.outputTokens, new Map()]],
    ]),
  );
}

/**
 * Reads a `pay-usage` value back, or returns null when it is not one. Unknown
 * members and parameters are ignored, as RFC 8941 asks of dictionary readers,
 * so the header can grow (say, a `cached_tokens`) without breaking readers.
 */
export function parsePayUsage(header: string | undefined): PayUsage | null {
  if (header === undefined) return null;
  let dictionary;
  try {
    dictionary = parseDictionary(header);
  } catch {
    return null;
  }
  const slug = bareItem(dictionary.get("slug"));
  const inputTokens = bareItem(dictionary.get("input_tokens"));
  const outputTokens = bareItem(dictionary.get("output_tokens"));
  if (typeof slug !== "string" || !SLUG_PATTERN.test(slug)) return null;
  if (!isCount(inputTokens) || !isCount(outputTokens)) return null;
  return { slug, inputTokens, outputTokens };
}

function bareItem(member: ReturnType<ReturnType<typeof parseDictionary>["get"]>): unknown {
  // An inner list is never a valid value for these members.
  if (member === undefined || Array.isArray(member[0])) return undefined;
  return member[0];
}

function isCount(value: unknown): value is number {
  return (
    typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= MAX_SF_INTEGER
  );
}

function assertCount(name: string, value: number): void {
  if (!isCount(value)) {
    throw new RangeError(`pay-usage: ${name} must be a non-negative integer, got ${String(value)}`);
  }
}
