import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { RUNTIME_BODY_LIMIT_BYTES } from "../../api/runtime-wire.js";
import { buildRuntime } from "../../runtime/app.js";
import { createRuntimeMetrics } from "../../runtime/metrics.js";
import { fixtureFolder, startRuntime } from "./support/runtime-server.js";

describe("overload", () => {
  it("answers 429 with Retry-After when the queue is full, and serves every accepted request", async () => {
    const path = await fixtureFolder("bench-gpt");
    const runtime = await startRuntime(
      { path, modelId: "bench-gpt" },
      { generationConcurrency: 1, maxQueue: 2 },
    );
    try {
      const responses = await Promise.all(
        Array.from({ length: 8 }, () =>
          runtime.post({
            model: "bench-gpt",
            input: "Overload me",
            temperature: 0,
            max_output_tokens: 40,
          }),
        ),
      );
      const statuses = responses.map((r) => r.status);
      expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(3);
      const refused = responses.filter((r) => r.status === 429);
      expect(refused.length).toBeGreaterThan(0);
      expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
      for (const response of refused) {
        expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
        expect(await response.json()).toMatchObject({
          error: { code: "rate_limit_exceeded", type: "rate_limit_error" },
        });
      }
    } finally {
      await runtime.close();
    }
  });
});

describe("health and readiness", () => {
  it("is live but not ready, and answers 503 with Retry-After, until the model is loaded", async () => {
    const app = buildRuntime({
      modelId: "m",
      service: () => null,
      metrics: createRuntimeMetrics({ model: "m" }),
      now: Date.now,
      logger: pino({ level: "silent" }),
    });
    const live = await app.inject({ method: "GET", url: "/v2/health/live" });
    expect(live.statusCode).toBe(200);
    const ready = await app.inject({ method: "GET", url: "/v2/health/ready" });
    expect(ready.statusCode).toBe(503);
    const response = await app.inject({
      method: "POST",
      url: "/v1/responses",
      payload: { model: "m", input: "x" },
    });
    expect(response.statusCode).toBe(503);
    expect(response.headers["retry-after"]).toBe("1");
    expect(response.json()).toMatchObject({ error: { code: "model_not_ready" } });
    await app.close();
  });

  it("is ready once the model is loaded and warmed", async () => {
    const runtime = await startRuntime({
      path: await fixtureFolder("tiny-gpt"),
      modelId: "tiny-gpt",
    });
    try {
      const ready = await fetch(`${runtime.url}/v2/health/ready`);
      expect(ready.status).toBe(200);
    } finally {
      await runtime.close();
    }
  });
});

describe("bad requests over HTTP", () => {
  it.each([
    ["malformed JSON", "{bad", "application/json", "invalid_json"],
    [
      "a wrong Content-Type",
      '{"model":"tiny-gpt","input":"x"}',
      "text/plain",
      "unsupported_content_type",
    ],
    ["an empty body", "", "application/json", "invalid_json"],
  ])("%s is a 400 failed envelope", async (_name, payload, type, code) => {
    const runtime = await startRuntime({
      path: await fixtureFolder("tiny-gpt"),
      modelId: "tiny-gpt",
    });
    try {
      const response = await fetch(`${runtime.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": type },
        body: payload,
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({
        object: "response",
        status: "failed",
        error: { code, type: "invalid_request_error" },
      });
    } finally {
      await runtime.close();
    }
  });

  it("a body over the limit is a clear 413", async () => {
    const runtime = await startRuntime({
      path: await fixtureFolder("tiny-gpt"),
      modelId: "tiny-gpt",
    });
    try {
      const response = await runtime.post({
        model: "tiny-gpt",
        input: "x".repeat(RUNTIME_BODY_LIMIT_BYTES + 1),
      });
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject({
        status: "failed",
        error: { code: "request_too_large" },
      });
    } finally {
      await runtime.close();
    }
  });
});
