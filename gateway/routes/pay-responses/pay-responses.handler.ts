import { createHash } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { CodedError } from "../../../lib/coded-error.js";
import { GatewayErrors } from "../../errors.js";
import { INVALID_PAY_SIGNATURE_BODY, PayErrors } from "../../pay/pay-errors.js";
import { formatPayUsage } from "../../pay/pay-usage.js";
import type { PaymentGate, RateLimit } from "../../ports.js";
import { admit, forward, sendForwarded, type InferenceDeps } from "../inference.js";

/**
 * The payment route, in the order spec 5.2 sets: the signature over the raw
 * bytes (never failed open), the body, the allowance check before any
 * inference (failed open only when the provider cannot answer), inference,
 * then the settlement, durable before the answer and its `pay-usage` leave.
 */
export interface PayResponsesDeps extends InferenceDeps {
  /** null when no payment provider is configured: every request is a 401. */
  pay: PaymentGate | null;
  rateLimit: RateLimit;
}

/** Header values that go into logs: single, printable, bounded. */
function loggable(value: string | string[] | undefined): string | null {
  return typeof value === "string" && /^[\x21-\x7e]{1,128}$/.test(value) ? value : null;
}

function hashOf(value: string): string {
  return createHash("sha256").update(value).digest("hex").slice(0, 16);
}

function withBody(error: CodedError, body: unknown): CodedError {
  return new CodedError(error.code, error.statusCode, error.type, error.message, {
    body,
    param: error.param,
    retryAfterSeconds: error.retryAfterSeconds,
  });
}

/** The allowance covers the worst case: the model's whole token limit, or the input plus the output asked for. */
export function mostTokens(
  input: string,
  instructions: string | undefined,
  maxOutput: number | null | undefined,
  maxTokens: number | undefined,
): number {
  if (maxTokens !== undefined) return maxTokens + (maxOutput ?? 0);
  // No limit known: one token per UTF-8 byte bounds any BPE or WordPiece tokenizer.
  return Buffer.byteLength(input) + Buffer.byteLength(instructions ?? "") + (maxOutput ?? 4096);
}

export function payResponsesHandler(deps: PayResponsesDeps) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const header = request.headers["pay-signature"];
    if (!deps.pay || typeof header !== "string") {
      throw withBody(
        PayErrors.invalidPaySignature(deps.pay ? "missing" : "not_configured"),
        INVALID_PAY_SIGNATURE_BODY,
      );
    }
    const check = deps.pay.verify(header, request.rawBody ?? Buffer.alloc(0));
    if (!check.ok) {
      throw check.error.statusCode === 401
        ? withBody(check.error, INVALID_PAY_SIGNATURE_BODY)
        : check.error;
    }
    const agentHeader = request.headers["pay-agent-id"];
    const agentId = loggable(agentHeader);
    // An agent id unfit for logs still names a caller: it is known by its hash.
    const unloggedAgent =
      agentHeader === undefined ? null : `sha256:${hashOf(String(agentHeader))}`;
    const payRequestId = loggable(request.headers["pay-request-id"]);
    // Both loggers: Fastify writes the request's completion line through reply.log.
    request.log = reply.log = request.log.child({
      payAgentId: agentId ?? unloggedAgent,
      payRequestId,
      kid: check.kid,
    });

    const admitted = admit(deps, request, "pay");
    const limit = deps.rateLimit.take(`agent:${agentId ?? unloggedAgent ?? "anonymous"}`);
    if (!limit.ok) {
      deps.metrics.rateLimited.inc({ route: "pay" });
      throw GatewayErrors.rateLimited(limit.retryAfterSeconds);
    }

    const { body, model } = admitted;
    const allowance = await deps.pay.checkAllowance({
      request_id: request.id,
      agent_id: agentId,
      service_slug: model.serviceSlug,
      model: model.id,
      max_tokens: mostTokens(
        body.input,
        body.instructions,
        body.max_output_tokens,
        model.maxTokens,
      ),
    });
    if (allowance.kind === "denied") {
      // The provider's own bytes, unchanged: the caller's client may parse fields we do not know.
      throw withBody(PayErrors.paymentRequired(allowance), allowance.raw);
    }
    if (allowance.kind === "unavailable") {
      deps.metrics.allowanceFailOpen.inc({ reason: allowance.reason });
      request.log.warn(
        { reason: allowance.reason },
        "payment provider unavailable: allowance check failed open",
      );
    }

    const forwarded = await forward(deps, request, admitted);
    if (forwarded.kind !== "success") return sendForwarded(reply, forwarded);
    const usage = {
      inputTokens: forwarded.usage.inputTokens,
      outputTokens: forwarded.usage.outputTokens,
    };
    const agent = agentId ?? unloggedAgent ?? "anonymous";
    deps.metrics.payTokens.inc({ agent, model: model.id, direction: "input" }, usage.inputTokens);
    deps.metrics.payTokens.inc({ agent, model: model.id, direction: "output" }, usage.outputTokens);
    await deps.pay.settle({
      request_id: request.id,
      agent_id: agentId,
      service_slug: model.serviceSlug,
      model: model.id,
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
    });
    return sendForwarded(reply, forwarded, {
      "pay-usage": formatPayUsage({ slug: model.serviceSlug, ...usage }),
    });
  };
}
