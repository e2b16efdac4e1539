import type { RoutableModel } from "../../gateway/registry/registry.js";
import { formatPaySignature, signPayload } from "../../gateway/pay/signature.js";

/**
 * The lines `modelgate dev` prints: for each model, a curl that works as
 * written on each route it serves. The payment-route line carries a
 * signature made now, valid for the signature tolerance.
 */
export interface CallContext {
  baseUrl: string;
  apiKey: string;
  pay: { kid: string; secret: string; secretFile: string } | null;
  nowSeconds: number;
}

export function sampleBody(model: RoutableModel): string {
  return model.task === "zero-shot-classification"
    ? JSON.stringify({
        model: model.id,
        input: "The team scored a late goal to win the match",
        categories: ["sports", "politics", "cooking"],
      })
    : JSON.stringify({
        model: model.id,
        input: "Hello! Who are you?",
        max_output_tokens: 32,
        temperature: 0,
      });
}

export function howToCall(models: readonly RoutableModel[], context: CallContext): string[] {
  const lines: string[] = [];
  for (const model of models) {
    const body = sampleBody(model);
    lines.push(`# ${model.id} (${model.task})`);
    if (model.routes.has("api-key")) {
      lines.push(
        `curl -s ${context.baseUrl}/v1/responses -H 'content-type: application/json' -H 'x-api-key: ${context.apiKey}' -d '${body}'`,
      );
    }
    if (model.routes.has("pay") && context.pay) {
      const signature = formatPaySignature({
        t: context.nowSeconds,
        kid: context.pay.kid,
        v1: [signPayload(Buffer.from(body), context.pay.secret)],
      });
      lines.push(
        `curl -s -i ${context.baseUrl}/pay/v1/responses -H 'content-type: application/json' -H 'pay-agent-id: demo-agent' -H 'pay-signature: ${signature}' -d '${body}'`,
      );
    }
    lines.push("");
  }
  if (context.pay) {
    lines.push(
      "# A payment-route signature is valid for 5 minutes; sign a new body with:",
      `#   npm run modelgate -- pay sign --kid ${context.pay.kid} --secret-file ${context.pay.secretFile} --body '<json>'`,
    );
  }
  return lines;
}
