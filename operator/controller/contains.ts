/**
 * Whether `actual` (an object as the API server returns it) already holds
 * everything in `desired` (what the operator would apply). Fields the server
 * or other controllers add (defaults, status, replicas chosen by the HPA)
 * are ignored; a field the operator sets that was changed or removed by hand
 * makes it false, and the reconciler applies again to restore it.
 *
 * Arrays must match in length and element by element, because the operator
 * owns whole lists (containers, args, ports). Scalars compare by value, with
 * numbers and their string forms equal where Kubernetes stores int-or-string
 * fields either way. A quantity the server normalizes ("1000m" stored as
 * "1") is reported as different: that costs one no-op apply, never a wrong
 * object.
 */
export function containsDesired(actual: unknown, desired: unknown): boolean {
  if (desired === undefined) return true;
  if (desired === null || typeof desired !== "object") {
    if (actual === desired) return true;
    return (
      (typeof actual === "number" || typeof actual === "string") &&
      (typeof desired === "number" || typeof desired === "string") &&
      String(actual) === String(desired)
    );
  }
  if (Array.isArray(desired)) {
    if (!Array.isArray(actual) || actual.length !== desired.length) return false;
    return desired.every((item, i) => containsDesired(actual[i], item));
  }
  if (actual === null || typeof actual !== "object" || Array.isArray(actual)) return false;
  const got = actual as Record<string, unknown>;
  return Object.entries(desired as Record<string, unknown>).every(([key, value]) =>
    containsDesired(got[key], value),
  );
}
