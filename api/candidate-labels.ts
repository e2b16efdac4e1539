/**
 * Candidate labels of a zero-shot classification request. They come from
 * `categories` or, when that is empty or absent, from `instructions`; either
 * may hold a comma-separated list, optionally in brackets ("[sports, politics]").
 *
 * The grammar is written once, as regular expressions, so that the request
 * schema validates with it and the OpenAPI document carries it as `pattern`:
 * what the document calls a valid list is exactly what parses into 1 to 10
 * labels here. Whitespace is the four ASCII characters only (`[ \t\n\r]`):
 * `\s` and String.trim differ between JavaScript and other languages' regular
 * expressions (U+FEFF is whitespace to one and not the other), and a client
 * generating requests from the document must agree with us on every byte.
 */

export const CANDIDATE_LABELS_MAX = 10;

const WS = "[ \\t\\n\\r]";
/** A label character that may start or end a label: no comma, bracket, quote or whitespace. */
const EDGE = "[^,\\[\\]\"' \\t\\n\\r]";
/** Inside a label, spaces are allowed; commas, brackets and quotes are not. */
const INNER = "[^,\\[\\]\"']";
/** One label, optionally quoted, with whitespace around it. */
const ITEM = `${WS}*["']?${EDGE}(?:${INNER}*${EDGE})?["']?${WS}*`;
/** One label: what each item of a multi-item `categories` array must be. */
export const SINGLE_LABEL_PATTERN = new RegExp(`^${ITEM}$`);

/** A list of 1 to `max` labels separated by commas, bare or in brackets. */
export function labelListPattern(max: number): RegExp {
  const list = `${ITEM}(?:,${ITEM}){0,${max - 1}}`;
  return new RegExp(`^(?:${list}|${WS}*\\[${list}\\]${WS}*)$`);
}

/** A list of 1 to 10 labels, bare or in brackets: one `categories` item, or `instructions`. */
export const LABEL_LIST_PATTERN = labelListPattern(CANDIDATE_LABELS_MAX);

const EDGE_SPACE = /^[ \t\n\r]+|[ \t\n\r]+$/g;
const EDGE_QUOTE = /^["']|["']$/g;

export function parseCandidateLabels(request: {
  categories?: readonly string[] | undefined;
  instructions?: string | null | undefined;
}): string[] {
  const sources =
    request.categories && request.categories.length > 0
      ? request.categories
      : request.instructions
        ? [request.instructions]
        : [];
  const labels: string[] = [];
  const seen = new Set<string>();
  for (const source of sources) {
    for (const part of splitList(source)) {
      if (!seen.has(part)) {
        seen.add(part);
        labels.push(part);
      }
    }
  }
  return labels;
}

/** The labels of one list (bare or bracketed), unquoted and trimmed, empty items dropped. */
export function splitList(text: string): string[] {
  let body = text.replace(EDGE_SPACE, "");
  const bracketed = /^\[(.*)\]$/s.exec(body);
  if (bracketed) body = bracketed[1] ?? "";
  return body
    .split(",")
    .map((part) => part.replace(EDGE_SPACE, "").replace(EDGE_QUOTE, "").replace(EDGE_SPACE, ""))
    .filter((part) => part.length > 0);
}
