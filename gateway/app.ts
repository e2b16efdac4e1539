import multipart from "@fastify/multipart";
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { sendError } from "../api/error-envelope.js";
import { isCodedError } from "../lib/coded-error.js";
import { HttpErrors } from "../lib/http/http-errors.js";
import { acceptJsonBodiesOnly } from "../lib/http/json-body.js";
import "../lib/http/reason-phrases.js";
import type { KeyStore } from "./auth/key-store.js";
import { batchHandlers } from "./batch/batches.routes.js";
import { FILE_LIMITS, fileHandlers, type FileLimits } from "./batch/files.routes.js";
import { storeCalls, type StoreCalls } from "./store/store-calls.js";
import { GatewayErrors } from "./errors.js";
import type { Meter } from "./metering/meter.js";
import type { GatewayMetrics } from "./metrics.js";
import { openApiDocumentOf } from "./openapi.js";
import type { AllowanceRequest, AllowanceResult } from "./pay/provider-client.js";
import type { UsedSignatures } from "./pay/used-signatures.js";
import { accessLogHooks } from "./plugins/access-log.js";
import { compileBodySchema } from "./plugins/body-admission.js";
import type { MeteringParts, Settlements } from "./plugins/metering.js";
import type { PaymentGateParts } from "./plugins/payment-gate.js";
import type { RateLimitParts } from "./plugins/rate-limits.js";
import { routeHooksOf, type HookParts } from "./plugins/route-hooks.js";
import { requestIdFrom, requestIdHooks, stampRequestId } from "./plugins/request-id.js";
import { slowClientGuard, slowClientOptions } from "./plugins/slow-clients.js";
import type { RateLimits } from "./rate-limit/limits.js";
import type { Limiter } from "./rate-limit/limiter.js";
import type { ModelRegistry } from "./registry/registry.js";
import { PLAIN_ROUTE, routeConfigOf, type GatewayRouteConfig } from "./routes/route-config.js";
import {
  ROUTES,
  answerOtherMethods,
  fastifyPath,
  registerManagementRoutes,
  registerRoutes,
  servedMethods,
} from "./routes/route-table.js";
import type { ResponseStore } from "./store/response-store.js";
import { isStoreUnreachable } from "./store/store-unreachable.js";
import type { Upstream } from "./upstream/forward.js";

/** The payment route's parts; absent when no provider is configured (every request is a 401). */
export interface PaymentDeps {
  /** kid -> its secrets. */
  secrets: ReadonlyMap<string, readonly string[]>;
  toleranceSeconds: number;
  usedSignatures: UsedSignatures;
  checkAllowance(request: AllowanceRequest): Promise<AllowanceResult>;
  settlements: Settlements;
}

/** Everything the gateway uses, built by the caller: the app creates no clients of its own. */
export interface GatewayDeps {
  registry: ModelRegistry;
  upstream: Upstream;
  keys: KeyStore;
  /** This process's buckets, or Valkey's shared by every replica (gateway/shared-state/). */
  limiter: Limiter;
  /** Limits of callers without their own: every buying agent, keys without `rateLimit`. */
  rateLimits: RateLimits;
  meter: Meter;
  pay: PaymentDeps | null;
  /** Stored responses (`store: true`, previous_response_id); null: nothing is stored. */
  responses?: ResponseStore | null;
  metrics: GatewayMetrics;
  logger: FastifyBaseLogger;
  now: () => number;
  bodyLimit?: number;
  /** Seconds a client has to send its whole request (headers and body); 408 after. */
  requestTimeoutSeconds?: number;
  /** Seconds a file upload's body has to arrive; 408 after. */
  uploadTimeoutSeconds?: number;
  version?: string;
  /** The system of record for files, batches and the usage ledger's reads; without it their routes answer 503. */
  store?: StoreCalls;
  /** Upload limits: 200 MB and 50,000 lines unless set (tests only). */
  fileLimits?: FileLimits;
  /** A batch's completion window; 24 hours unless set (`--batch-completion-window`). */
  batchWindowSeconds?: number;
}

export const DEFAULT_BATCH_WINDOW_SECONDS = 24 * 3600;

export const DEFAULT_BODY_LIMIT = 1024 * 1024;
export const DEFAULT_REQUEST_TIMEOUT_SECONDS = 30;
/** The longest path parameter the router takes (Fastify's default); ids are far shorter. */
const MAX_PARAM_LENGTH = 100;
/** 200 MB in 15 minutes: about 1.8 Mbit/s. */
export const DEFAULT_UPLOAD_TIMEOUT_SECONDS = 900;

/** The interface's version (spec section 9), not the software's. */
export const API_VERSION = "1.0.0";

const NOT_CONFIGURED: ReadonlyMap<string, readonly string[]> = new Map();
/** Never consulted: without secrets every signature fails before the memory is asked. */
const NO_SIGNATURES: UsedSignatures = {
  claim: () => Promise.resolve(false),
  release: () => Promise.resolve(),
};

/**
 * The gateway's API server, not yet listening: the model routes of the route
 * table and `/openapi.json`. Health and metrics are on another port
 * (ops-server.ts), never reachable through the API's Service.
 */
export function buildGateway(deps: GatewayDeps): FastifyInstance {
  const requestTimeoutSeconds = deps.requestTimeoutSeconds ?? DEFAULT_REQUEST_TIMEOUT_SECONDS;
  const bodyLimit = deps.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit,
    genReqId: requestIdFrom,
    // One line per request, written when it completes (access-log.ts), not two.
    logController: new LogController({
      requestIdLogLabel: "requestId",
      disableRequestLogging: true,
    }),
    // Connections from a load balancer are long-lived; keep them open.
    keepAliveTimeout: 65_000,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // What the router refuses before any route or hook runs, answered at the
    // one error edge with a request id rather than in Fastify's own body.
    frameworkErrors: (error, request, reply) => {
      stampRequestId(request, reply);
      const answer =
        error.code === "FST_ERR_MAX_PARAM_LENGTH"
          ? HttpErrors.paramTooLong(MAX_PARAM_LENGTH)
          : HttpErrors.badUrl();
      void sendError(answer, request, reply, deps.now, true);
    },
    ...slowClientOptions(
      requestTimeoutSeconds,
      deps.uploadTimeoutSeconds ?? DEFAULT_UPLOAD_TIMEOUT_SECONDS,
    ),
  });
  acceptJsonBodiesOnly(app);
  app.setErrorHandler((error, request, reply) => {
    // A store call that failed for want of the database is a 503 to retry,
    // not a 500; the cause stays in the log. A coded error already says what
    // failed: its cause may be a socket error of a runtime (ECONNRESET),
    // which would otherwise read as the database being down.
    const answered =
      !isCodedError(error) && isStoreUnreachable(error)
        ? Object.assign(GatewayErrors.storeUnavailable(), { cause: error })
        : error;
    return sendError(
      answered,
      request,
      reply,
      deps.now,
      routeConfigOf(request).errorBody === "envelope",
    );
  });
  app.setNotFoundHandler((request) => {
    throw HttpErrors.notFound(request.method, request.url);
  });
  // Every response, the 404s and 405s included: one hook for what every
  // request needs first, then the access log.
  requestIdHooks(app);
  const guardSlowClient = slowClientGuard(requestTimeoutSeconds);
  app.addHook("onRequest", (request, reply, done) => {
    stampRequestId(request, reply);
    guardSlowClient(request, reply);
    done();
  });
  accessLogHooks(app, deps.metrics);
  app.decorateRequest("matchedRoute", null);
  app.decorateRequest("caller", null);
  app.decorateRequest("model", null);
  app.decorateRequest("tokenReservations", null);
  app.decorateRequest("streamedUsage", null);

  // The model routes, in a scope of their own, each with the hooks its
  // config asks for (plugins/route-hooks.ts says in which order).
  app.register((scope, _options, done) => {
    const pay: PaymentGateParts = {
      secrets: deps.pay?.secrets ?? NOT_CONFIGURED,
      toleranceSeconds: deps.pay?.toleranceSeconds ?? 0,
      usedSignatures: deps.pay?.usedSignatures ?? NO_SIGNATURES,
      checkAllowance: (request) =>
        deps.pay?.checkAllowance(request) ?? Promise.reject(new Error("no payment provider")),
      metrics: deps.metrics,
      now: deps.now,
      bodyLimit,
    };
    const limits: RateLimitParts = {
      limiter: deps.limiter,
      defaults: deps.rateLimits,
      metrics: deps.metrics,
      bodyLimit,
    };
    scope.setValidatorCompiler(compileBodySchema);
    scope.decorateReply("served", null);
    const metering: MeteringParts = {
      meter: deps.meter,
      settlements: deps.pay?.settlements ?? null,
      metrics: deps.metrics,
      now: deps.now,
    };
    const hookParts: HookParts = { keys: deps.keys, limits, pay, metering };
    const hooksOf = (config: GatewayRouteConfig) => routeHooksOf(config, hookParts);
    const store =
      deps.store ?? storeCalls({ db: () => Promise.reject(new Error("no store configured")) });
    registerRoutes(
      scope,
      { ...deps, store, metering, responses: deps.responses ?? null, bodyLimit },
      hooksOf,
    );
    // The Files and Batch routes, in a scope of their own that also reads multipart forms.
    scope.register(async (management) => {
      await management.register(multipart, {
        // The route counts bytes itself and refuses past its limit with its own
        // 413; past one byte more the reader drops the rest of the file itself.
        throwFileSizeLimit: false,
        limits: {
          fileSize: (deps.fileLimits ?? FILE_LIMITS).bytes + 1,
          files: 1,
          fields: 8,
          parts: 16,
        },
      });
      registerManagementRoutes(
        management,
        {
          ...fileHandlers(store, deps.now, deps.fileLimits),
          ...batchHandlers(store, deps.now, {
            windowSeconds: deps.batchWindowSeconds ?? DEFAULT_BATCH_WINDOW_SECONDS,
          }),
        },
        hooksOf,
      );
    });
    done();
  });

  const openapi = openApiDocumentOf(ROUTES, deps.registry, deps.version ?? API_VERSION);
  app.get("/openapi.json", { config: { gateway: PLAIN_ROUTE } }, () => openapi());
  answerOtherMethods(
    app,
    servedMethods([
      ...ROUTES.map((route) => ({ method: route.method, path: fastifyPath(route.path) })),
      { method: "GET", path: "/openapi.json" },
    ]),
  );
  return app;
}
