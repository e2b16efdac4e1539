/**
 * The first query parameter given more than once that may not be, or null.
 * Fastify's query parser makes a repeated name an array, which a schema for
 * one value then reads as a wrong value ("received NaN" for `limit=1&limit=2`)
 * rather than what it is.
 */
export function repeatedQueryParam(
  query: unknown,
  repeatable: ReadonlySet<string> = new Set(),
): string | null {
  if (typeof query !== "object" || query === null) return null;
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value) && !repeatable.has(name)) return name;
  }
  return null;
}
