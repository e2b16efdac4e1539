import type { IncomingHttpHeaders } from "node:http";
import { usageFromHeaders, type Usage } from "../../api/runtime-wire.js";
import type { CodedError } from "../../lib/coded-error.js";
import { GatewayErrors } from "../errors.js";

/**
 * What the gateway makes of a runtime's answer, as a pure decision: pass it
 * through (with the usage it reports), or replace it with our own error.
 */
export type Relay =
  | { kind: "success"; usage: Usage | null }
  /** A client error the runtime already phrased in the spec's shape (400, 413, 420, 429). */
  | { kind: "client-error" }
  | { kind: "error"; error: CodedError };

export function relayOf(status: number, headers: IncomingHttpHeaders, model: string): Relay {
  if (status === 200) return { kind: "success", usage: usageFromHeaders(headers) };
  if (status >= 400 && status < 500 && status !== 404 && status !== 408) {
    return { kind: "client-error" };
  }
  if (status === 503) return { kind: "error", error: GatewayErrors.modelUnavailable(model) };
  return { kind: "error", error: GatewayErrors.upstreamError(model) };
}

/** Response headers of the runtime that the client may see. */
export function relayedHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  const type = headers["content-type"];
  if (typeof type === "string") out["content-type"] = type;
  const retry = headers["retry-after"];
  if (typeof retry === "string") out["retry-after"] = retry;
  return out;
}
