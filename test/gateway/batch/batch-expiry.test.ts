import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, type Platform } from "../support/platform.js";
import { finished, linesOf, openaiClient, submit, waitFor } from "./support.js";

/**
 * A completion window set short by configuration (`batchCompletionWindow`,
 * seconds): what finished in time is kept, what did not is reported in the
 * error file as `batch_expired`, and the batch ends `expired`.
 */
let p: Platform;
let client: OpenAI;
beforeAll(async () => {
  p = await startPlatform({
    withoutPayments: true,
    config: { batchPollMs: 50, batchWorkers: 1, batchCompletionWindow: 8 },
  });
  client = openaiClient(p.url, p.keys.acme.key);
});
afterAll(async () => p?.close());

describe("a batch past its completion window", () => {
  it("expires: finished lines kept, the rest batch_expired, each custom_id once", async () => {
    // Lines that cannot all finish in the window whatever the machine: each
    // makes 64 tokens (checked below), one line in flight, so 3,000 would
    // need 192,000 decode steps and as many hops in under 8 s. A fast
    // machine here finished 691 (2026-11-27). Short nli lines filled the
    // window on a slow machine but all finished on a fast one (10,000 in 8 s).
    const lines = Array.from({ length: 3_000 }, (_, n) => ({
      custom_id: `gpt-${n}`,
      body: { model: "tiny-gpt", input: `Hello ${n}`, max_output_tokens: 64, temperature: 0 },
    }));
    const created = await submit(client, lines);
    expect(created.expires_at! - created.created_at).toBe(8);
    const done = await waitFor(client, created.id, finished);
    expect(done.status).toBe("expired");
    expect(done.expired_at).not.toBeNull();
    const { total, completed, failed } = done.request_counts!;
    expect(total).toBe(3_000);
    expect(completed).toBeGreaterThan(0);
    expect(failed).toBeGreaterThan(0);
    expect(completed + failed).toBe(3_000);
    const output = await linesOf(client, done.output_file_id);
    const errors = await linesOf(client, done.error_file_id);
    expect(output).toHaveLength(completed);
    expect(output.every((line) => line.response?.status_code === 200)).toBe(true);
    expect(output.every((line) => line.response?.body.usage?.output_tokens === 64)).toBe(true);
    expect(errors).toHaveLength(failed);
    for (const line of errors) {
      expect(line.response).toBeNull();
      expect(line.error).toMatchObject({ code: "batch_expired" });
    }
    const ids = [...output, ...errors].map((line) => line.custom_id);
    expect(new Set(ids)).toEqual(new Set(lines.map((line) => line.custom_id)));
  });
});
