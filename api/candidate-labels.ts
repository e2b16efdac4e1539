/**
 * Candidate labels of a zero-shot classification request. They come from
 * `categories` or, when that is absent, from `instructions`; either may hold
 * a comma-separated list, optionally in brackets ("[sports, politics]").
 */
export function parseCandidateLabels(request: {
  categories?: string[] | undefined;
  instructions?: string | undefined;
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

function splitList(text: string): string[] {
  let body = text.trim();
  const bracketed = /^\[(.*)\]$/s.exec(body);
  if (bracketed) body = bracketed[1] ?? "";
  return body
    .split(",")
    .map((part) =>
      part
        .trim()
        .replace(/^["']|["']$/g, "")
        .trim(),
    )
    .filter((part) => part.length > 0);
}
