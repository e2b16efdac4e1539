import type {
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
  onResponseHookHandler,
  onSendHookHandler,
  preHandlerAsyncHookHandler,
  preHandlerHookHandler,
  preValidationAsyncHookHandler,
  preValidationHookHandler,
} from "fastify";
import type { KeyStore } from "../auth/key-store.js";
import type { GatewayRouteConfig } from "../routes/route-config.js";
import { authenticateApiKey } from "./api-key-auth.js";
import { admitModel, raiseBodyProblem } from "./body-admission.js";
import { billServed, type MeteringParts } from "./metering.js";
import {
  checkAllowance,
  releaseRefused,
  verifyPayment,
  type PaymentGateParts,
} from "./payment-gate.js";
import {
  limitApiKeys,
  limitPaySigners,
  reserveApiKeyTokens,
  settleStreamedTokens,
  settleTokens,
  type RateLimitParts,
} from "./rate-limits.js";

/**
 * The hooks of one route, chosen from its `config` when it is registered:
 * a route runs the hooks that apply to it and no others (the key route
 * never meets the payment gate, a GET no admission), instead of every hook
 * of the scope asking each request whether it applies. Within a phase they
 * run in the order of the answers: API key 401 → 403 → 429 → 400; payment
 * signature 401/402 → 400 → 429 → 402; then inference, then billing before
 * the answer leaves. Steps that always run together are one hook, in
 * Fastify's callback form, so a step with nothing to wait for costs no
 * promise.
 */
export interface HookParts {
  keys: KeyStore;
  limits: RateLimitParts;
  pay: PaymentGateParts;
  metering: MeteringParts;
}

export interface RouteHooks {
  onRequest?: onRequestHookHandler[];
  preValidation?: (preValidationHookHandler | preValidationAsyncHookHandler)[];
  preHandler?: (preHandlerHookHandler | preHandlerAsyncHookHandler)[];
  onSend?: onSendHookHandler[];
  onResponse?: onResponseHookHandler[];
}

/** Hands on when `work` settles, or at once when it had nothing to wait for (null). */
function after(work: Promise<void> | null, done: HookHandlerDoneFunction): void {
  if (work === null) done();
  else work.then(() => done(), done);
}

type Step = (request: FastifyRequest, reply: FastifyReply) => Promise<void> | null;

export function routeHooksOf(config: GatewayRouteConfig, parts: HookParts): RouteHooks {
  const hooks: Required<RouteHooks> = {
    onRequest: [],
    preValidation: [],
    preHandler: [],
    onSend: [],
    onResponse: [],
  };
  const keyRoute = config.auth === "api-key";
  const payRoute = config.auth === "pay-signature";
  const modelRoute = config.modelRoute !== null;

  if (keyRoute) {
    // 401, 403, then 429 (requests), before the body is read.
    const authenticate = authenticateApiKey(parts.keys);
    const limit: Step | null = config.rateLimit === "api-key" ? limitApiKeys(parts.limits) : null;
    hooks.onRequest.push((request, reply, done) => {
      const refused = authenticate(request);
      if (refused !== null) return done(refused);
      if (limit === null) return done();
      after(limit(request, reply), done);
    });
  }
  // 401, 402 (stale), 401 (replay): over the raw bytes, before the body is judged.
  if (payRoute) hooks.preValidation.push(verifyPayment(parts.pay));
  // 400 (not JSON); then Fastify's validation: the route's RequestBodySchema (400).
  if (config.body !== "ignored") hooks.preValidation.push(raiseBodyProblem);

  if (modelRoute) {
    const reserve: Step | null =
      config.rateLimit === "api-key" ? reserveApiKeyTokens(parts.limits) : null;
    hooks.preHandler.push((request, reply, done) => {
      admitModel(request);
      // 429 (tokens)
      if (reserve === null) return done();
      after(reserve(request, reply), done);
    });
  }
  if (config.rateLimit === "pay-signer") hooks.preHandler.push(limitPaySigners(parts.limits)); // 429
  if (payRoute) hooks.preHandler.push(checkAllowance(parts.pay)); // 402

  // The handler: forward to a runtime, relay its answer (a stream bills from its last event).
  const limited = config.rateLimit !== "none";
  const bill: Step | null = config.metering !== "none" ? billServed(parts.metering) : null;
  if (limited || bill !== null) {
    hooks.onSend.push((request, reply, _payload, done) => {
      // The reservation first: it reads the usage that billing then marks as billed.
      if (limited) settleTokens(parts.limits, request, reply);
      if (bill === null) return done();
      after(bill(request, reply), done);
    });
  }
  // A refusal the client is told to retry gives its payment signature back (after billing: none was).
  if (payRoute && modelRoute) {
    const release = releaseRefused(parts.pay);
    hooks.onSend.push((request, reply, _payload, done) => after(release(request, reply), done));
  }
  // A stream's usage is known at its last event: its token reservation is settled once it ends.
  if (limited) hooks.onResponse.push(settleStreamedTokens(parts.limits));

  const chosen: RouteHooks = {};
  for (const phase of Object.keys(hooks) as (keyof RouteHooks)[]) {
    if (hooks[phase].length > 0) (chosen as Record<string, unknown>)[phase] = hooks[phase];
  }
  return chosen;
}
