import type { RoutableModel } from "../../gateway/registry/registry.js";
import { formatPaySignature, signPayload } from "../../gateway/pay/signature.js";
import { DEMO_ACCOUNT, DEMO_PROJECT } from "./demo-credentials.js";

/**
 * The lines `modelgate dev` prints: for each model, a curl that works as
 * written on each route it serves. The payment-route line carries a
 * signature made now, valid for the signature tolerance.
 */
export interface CallContext {
  baseUrl: string;
  apiKey: string;
  /** A project the demo key may use: shown on the classifier's line. */
  project: string;
  pay: { kid: string; secret: string; secretFile: string } | null;
  nowSeconds: number;
}

export function sampleBody(model: RoutableModel): string {
  if (model.task === "entity-extraction") {
    return JSON.stringify({
      model: model.id,
      input: "John Smith lives in Paris and his email is john@example.com",
      metadata: { usecase: "pii" },
    });
  }
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
      // One line shows x-project-id, as the README does; both work without it.
      const project =
        model.task === "zero-shot-classification" ? ` -H 'x-project-id: ${context.project}'` : "";
      lines.push(
        `curl -s ${context.baseUrl}/v1/responses -H 'content-type: application/json' -H 'x-api-key: ${context.apiKey}'${project} -d '${body}'`,
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

export interface BannerContext {
  address: string;
  models: number;
  apiKey: string;
  /** The state folder the key and secrets are kept in. */
  keptIn: string;
  /** True when dev serves its built-in generated models. */
  builtInModels: boolean;
}

/** What a newcomer must know before the first answer surprises them. */
export function banner(context: BannerContext): string[] {
  const lines = [
    "",
    `Modelgate is running: gateway ${context.address}, ${context.models} model(s).`,
    `Demo API key (account ${DEMO_ACCOUNT}, project ${DEMO_PROJECT}; kept in ${context.keptIn} across restarts):`,
    `  ${context.apiKey}`,
    "",
  ];
  if (context.builtInModels) {
    lines.push(
      "The built-in models are generated test models with random weights: tiny-gpt's text is",
      'noise (and often "incomplete": it stops at max_output_tokens), tiny-nli knows sports,',
      "politics, cooking and technology words. To serve the real SmolLM2, all-MiniLM-L6-v2",
      "and rampart-pii (entity extraction) from ../shared/models beside this checkout instead:",
      "  npm run dev -- --models-dir examples/shared-models",
      "",
    );
  }
  return lines;
}
