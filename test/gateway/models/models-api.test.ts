import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * `GET /v1/models` with the official `openai` client: the models an API key
 * may call on /v1/responses, from the registry (docs/gateway.md).
 */
let p: Platform;
let client: OpenAI;
beforeAll(async () => {
  p = await startPlatform();
  client = new OpenAI({ apiKey: p.keys.acme.key, baseURL: `${p.url}/v1`, maxRetries: 0 });
});
afterAll(async () => p?.close());

describe("the models list", () => {
  it("lists the API-key route's models, each as OpenAI's model object, and no payment-only one", async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model);
    const ids = models.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining(["tiny-gpt", "tiny-nli", "tiny-gpt-api"]));
    expect(ids).not.toContain("tiny-gpt-pay");
    expect(ids).toEqual([...ids].sort());
    for (const model of models) {
      expect(Object.keys(model).sort()).toEqual(["created", "id", "object", "owned_by"]);
      expect(model.object).toBe("model");
      expect(Number.isInteger(model.created)).toBe(true);
      expect(model.owned_by.length).toBeGreaterThan(0);
    }
    // A listed id is a `model` the responses route takes.
    const answer = await client.responses.create({
      model: "tiny-gpt",
      input: "Hi",
      max_output_tokens: 2,
    });
    expect(answer.model).toBe("tiny-gpt");
    expect(answer.status).not.toBe("failed");
  });

  it("retrieves one model as listed; an unknown or payment-only id is a 404 naming model", async () => {
    const listed = (await client.models.list()).data.find((m) => m.id === "tiny-gpt");
    expect(await client.models.retrieve("tiny-gpt")).toEqual(listed);
    for (const id of ["no-such-model", "tiny-gpt-pay"]) {
      const error = await client.models.retrieve(id).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error).toMatchObject({ status: 404, code: "model_not_found", param: "model" });
    }
  });

  it("asks for a key like every API-key route", async () => {
    const anonymous = await fetch(`${p.url}/v1/models`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("x-request-id")).toBeTruthy();
  });
});
