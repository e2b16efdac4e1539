/**
 * The endpoint with the fewest requests in flight, as load-aware routers
 * choose; ties go round-robin so that idle endpoints share the load.
 * `excluded` holds endpoints already tried for this request.
 */
export function pickEndpoint(
  endpoints: readonly string[],
  inFlight: ReadonlyMap<string, number>,
  excluded: ReadonlySet<string>,
  turn: number,
): string | undefined {
  let best: string | undefined;
  let bestLoad = Infinity;
  const count = endpoints.length;
  for (let i = 0; i < count; i++) {
    const endpoint = endpoints[(turn + i) % count]!;
    if (excluded.has(endpoint)) continue;
    const load = inFlight.get(endpoint) ?? 0;
    if (load < bestLoad) {
      best = endpoint;
      bestLoad = load;
    }
  }
  return best;
}
