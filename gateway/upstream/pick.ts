/**
 * Which runtime endpoint takes a request: the one with the fewest requests
 * in flight, as load-aware routers choose; ties go round-robin so that idle
 * endpoints share the load. `excluded` holds endpoints already tried for
 * this request.
 *
 * Prefix-aware routing: a continued conversation names the endpoint that
 * served its previous turn (`preferred`), whose prefix cache holds that
 * turn's keys and values; there the new turn prefills only what is new. It
 * goes there while that endpoint is ready (among `endpoints`, not excluded)
 * and not overloaded: overloaded means more requests in flight than the
 * least loaded endpoint plus `margin`. A few more rows in a decode step cost
 * little (a step reads the weights once for the whole batch), while a miss
 * prefills the whole conversation again; past the margin the queue behind
 * the preferred endpoint costs more than the prefill, and the least loaded
 * takes the request.
 */
export const PREFERRED_LOAD_MARGIN = 4;

export interface Preference {
  /** The endpoint that served the previous turn. */
  endpoint: string;
  /** In-flight requests it may carry beyond the least loaded endpoint's. */
  margin: number;
}

export function pickEndpoint(
  endpoints: readonly string[],
  inFlight: ReadonlyMap<string, number>,
  excluded: ReadonlySet<string>,
  turn: number,
  preferred?: Preference,
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
  if (
    preferred &&
    best !== undefined &&
    !excluded.has(preferred.endpoint) &&
    endpoints.includes(preferred.endpoint) &&
    (inFlight.get(preferred.endpoint) ?? 0) <= bestLoad + preferred.margin
  ) {
    return preferred.endpoint;
  }
  return best;
}
