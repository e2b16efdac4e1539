import type { FastifyRequest } from "fastify";
import type { RouteName } from "../../crds/inference-model.js";

/**
 * What a route needs from the gateway, said once in its `config` and read by
 * the hooks (authentication, rate limits, admission, metering, the payment
 * gate, metrics): routes are told apart by what they declare, never by their
 * URL. A route that declares nothing gets nothing.
 */
export interface GatewayRouteConfig {
  /** Who may call: an API key (401, 403), a payment signature (401, 402), or anyone. */
  auth: "api-key" | "pay-signature" | "none";
  /** Whose token bucket a request takes from: the API key's, the signing `kid`'s, or none. */
  rateLimit: "api-key" | "pay-signer" | "none";
  /**
   * How a served request is billed: a usage record for the key's account, a
   * settlement with the payment provider, or not at all.
   */
  metering: "usage" | "settlement" | "none";
  /**
   * The InferenceModel route (`spec.routes`) a model must allow to be served
   * here; null for routes that serve no model.
   */
  modelRoute: RouteName | null;
  /** The `route` label of the request metrics; null: not counted. */
  metricsName: string | null;
  /**
   * `envelope`: every error is the ErrorEnvelope, 400 included (a route that
   * creates no response has no failed response to answer with). Default: the
   * spec's failed Responses envelope for 400, 413 and 420.
   */
  errorBody?: "envelope";
  /**
   * `upload`: the body may take the upload timeout to arrive (`--upload-timeout`)
   * rather than the request timeout (a file of up to 200 MB). Default: the
   * request timeout, as for every small JSON body.
   */
  bodyTimeout?: "upload";
  /**
   * `ignored`: the route reads no body (a DELETE, a cancel), so whatever
   * arrives is not judged: the official Python client sends
   * `Content-Type: application/json` with an empty body on every such call.
   * Set from the route's spec when it is registered. Default: a body that is
   * not JSON is a 400, raised before validation.
   */
  body?: "ignored";
}

declare module "fastify" {
  interface FastifyContextConfig {
    gateway?: GatewayRouteConfig;
  }
  interface FastifyRequest {
    /** The matched route's config, read once per request (see `routeConfigOf`). */
    matchedRoute: MatchedRoute | null;
  }
}

/** The config of routes that declare nothing: the 404 handler, the document. */
export const PLAIN_ROUTE: GatewayRouteConfig = Object.freeze({
  // No response is created there, so no error is a failed response.
  errorBody: "envelope",
  auth: "none",
  rateLimit: "none",
  metering: "none",
  modelRoute: null,
  metricsName: null,
});

/** The route a request matched: its path as registered (absent for a 404) and its gateway config. */
export interface MatchedRoute {
  url?: string | undefined;
  gateway?: GatewayRouteConfig | undefined;
}

/**
 * The route a request matched, kept on the request: Fastify's
 * `routeOptions` getter builds a fresh object of a dozen fields on every
 * read, and a request asks from several hooks.
 */
export function matchedRouteOf(request: FastifyRequest): MatchedRoute {
  return (request.matchedRoute ??= request.routeOptions.config);
}

/** The gateway config of the route a request matched. */
export function routeConfigOf(request: FastifyRequest): GatewayRouteConfig {
  return matchedRouteOf(request).gateway ?? PLAIN_ROUTE;
}
