import { describe, expect, it } from "vitest";
import { USECASES } from "../../../api/entity-options.js";
import { mostTokens, type BillableBody } from "../../../gateway/metering/most-tokens.js";

/**
 * The worst case a request can be billed, which the allowance check asks
 * the provider for: it must never be below what the runtime bills.
 */
const gen = { task: "text-generation", maxTokens: 256 } as const;
const nli = { task: "zero-shot-classification", maxTokens: 100 } as const;
const span = { task: "entity-extraction", maxTokens: 50 } as const;
const bytes = (text: string) => Buffer.byteLength(text);
/** The body limit: what a continuation forwards at most. */
const FORWARDED = 1 << 20;

describe("mostTokens", () => {
  it.each<[string, BillableBody, Parameters<typeof mostTokens>[1], number]>([
    [
      "text generation: the limit, whatever the output asked",
      { input: "hi", max_output_tokens: 1e9 },
      gen,
      256,
    ],
    [
      "text generation without a limit: bytes and 4096",
      { input: "héllo", instructions: "be" },
      { task: "text-generation", maxTokens: undefined },
      6 + 2 + 4096,
    ],
    [
      "a continuation without a limit: the most bytes forwarded, and the output",
      { input: "hi", previous_response_id: "resp_1", max_output_tokens: 16 },
      { task: "text-generation", maxTokens: undefined },
      FORWARDED + 16,
    ],
    [
      "a continuation with a limit: the limit",
      { input: "hi", previous_response_id: "resp_1" },
      gen,
      256,
    ],
    // Each label: the template's 32 bytes (the built-in ones are shorter), its own bytes, 4 specials.
    [
      "a classifier: the limit plus each label's hypothesis",
      { input: "x", categories: ["sports", "politics"] },
      nli,
      100 + (32 + 6 + 4) + (32 + 8 + 4),
    ],
    [
      "a classifier's template with the label twice",
      { input: "x", categories: ["ab"] },
      { ...nli, hypothesisTemplate: "{} or {}?" },
      100 + (9 + 2 * 2 + 4),
    ],
    [
      "a classifier's labels in instructions",
      { input: "x", instructions: "[a, bb]" },
      nli,
      100 + (32 + 1 + 4) + (32 + 2 + 4),
    ],
    [
      "extraction: the limit plus the labels' bytes twice",
      { input: "x", metadata: { labels: "EMAIL, PHONE" } },
      span,
      50 + 4 + (2 * 12 + 4),
    ],
  ])("%s", (_name, body, model, expected) => {
    expect(mostTokens(body, model, FORWARDED)).toBe(expected);
  });

  it("counts a usecase's own labels, which the request does not spell out", () => {
    const labels = USECASES.pii.spanLabels;
    const prompt = labels.reduce((sum, label) => sum + bytes(label) + 1, 0);
    expect(mostTokens({ input: "x", metadata: { usecase: "pii" } }, span, FORWARDED)).toBe(
      50 + 4 + prompt,
    );
    // Ten labels of two to four words: more than the 14 that the option's own bytes gave.
    expect(prompt).toBeGreaterThan(2 * bytes("pii") + 4);
  });
});
