import { Counter, type Registry } from "prom-client";

export type TokenLabels = "account" | "project" | "model" | "direction";
export type RequestLabels = "account" | "project" | "model";

export interface MeterCollectors {
  tokens: Counter<TokenLabels>;
  requests: Counter<RequestLabels>;
}

const TOKENS = "modelgate_gateway_tokens_total";
const REQUESTS = "modelgate_gateway_metered_requests_total";

/**
 * The metering counters on the registry the app passes in. Label values come
 * from the keys file (accounts, projects) and the registry (models), so their
 * number is bounded by configuration, not by callers.
 */
export function registerMeterCollectors(registry: Registry): MeterCollectors {
  const tokens = registry.getSingleMetric(TOKENS) as Counter<TokenLabels> | undefined;
  const requests = registry.getSingleMetric(REQUESTS) as Counter<RequestLabels> | undefined;
  if (tokens && requests) return { tokens, requests };
  const registers = [registry];
  return {
    tokens:
      tokens ??
      new Counter({
        name: TOKENS,
        help: "Tokens metered on the API-key route, by direction (input or output)",
        labelNames: ["account", "project", "model", "direction"],
        registers,
      }),
    requests:
      requests ??
      new Counter({
        name: REQUESTS,
        help: "Requests metered on the API-key route",
        labelNames: ["account", "project", "model"],
        registers,
      }),
  };
}
