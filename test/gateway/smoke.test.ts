import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "./support/platform.js";

describe("gateway smoke", () => {
  let p: Platform;
  beforeAll(async () => {
    p = await startPlatform();
  });
  afterAll(async () => p?.close());

  it("serves both routes end to end", async () => {
    const api = await p.api({
      model: "tiny-gpt",
      input: "Hello",
      max_output_tokens: 4,
      temperature: 0,
    });
    expect(api.status).toBe(200);
    expect(api.headers.get("x-inference-type")).toBe("cloud");
    expect(api.headers.get("x-request-id")).toMatch(/^req_/);
    const pay = await p.pay(
      { model: "tiny-gpt", input: "Hello", max_output_tokens: 4, temperature: 0 },
      { headers: { "pay-agent-id": "agent-7" } },
    );
    expect(pay.status).toBe(200);
    expect(pay.headers.get("pay-usage")).toMatch(
      /^slug="tiny-gpt", input_tokens=\d+, output_tokens=4$/,
    );
    // Paid tokens by model, on the operations port; the agent is no label (it is caller-chosen).
    const metrics = await (await fetch(`${p.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(
      /modelgate_gateway_pay_tokens_total\{model="tiny-gpt",direction="output"\} 4/,
    );
    const nli = await p.api({
      model: "tiny-nli",
      input: "The team scored a goal",
      categories: ["sports", "cooking"],
    });
    const scores = (await nli.json()) as Record<string, number>;
    expect(Object.keys(scores)).toEqual(["sports", "cooking"]);
    expect(scores.sports).toBeGreaterThan(scores.cooking!);
  });
});
