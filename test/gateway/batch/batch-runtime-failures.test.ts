import type OpenAI from "openai";
import { USAGE_HEADERS } from "../../../api/runtime-wire.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_LINE_ATTEMPTS } from "../../../gateway/batch/batch-worker.js";
import { standInRuntime, type StandInRuntime } from "../support/stand-in-runtime.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { finished, linesOf, openaiClient, submit, waitFor } from "./support.js";

/**
 * Batch lines a runtime fails every time. A line whose request the runtime
 * answers with a 500, or whose connection it drops once it has the request
 * (as a runtime crashing on it would), is sent MAX_LINE_ATTEMPTS times and
 * then failed, so the batch completes; before, it was sent again every
 * second until the 24-hour window ended, and the batch with it.
 */
let p: Platform;
let client: OpenAI;
let runtime: StandInRuntime;
const sent = new Map<string, number>();

beforeAll(async () => {
  p = await startPlatform({
    withoutPayments: true,
    config: { batchPollMs: 50, batchWorkers: 1 },
  });
  client = openaiClient(p.url, p.keys.acme.key);
  runtime = await standInRuntime(p, "breakable", (res, _req, body) => {
    const { input } = JSON.parse(body.toString("utf8")) as { input: string };
    sent.set(input, (sent.get(input) ?? 0) + 1);
    if (input === "answer with 500") {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "boom", type: "server_error", code: null } }));
    } else if (input === "drop the connection") {
      res.socket?.destroy();
    } else {
      res.writeHead(200, {
        "content-type": "application/json",
        [USAGE_HEADERS.input]: "3",
        [USAGE_HEADERS.output]: "2",
      });
      res.end(JSON.stringify({ object: "response", status: "completed", output: [] }));
    }
  });
});
afterAll(async () => {
  await runtime?.close();
  await p?.close();
});

const line = (custom_id: string, input: string) => ({
  custom_id,
  body: { model: "breakable", input },
});

describe("batch lines a runtime fails every time", () => {
  it(`are sent ${MAX_LINE_ATTEMPTS} times, then failed with the last failure, and the batch completes`, async () => {
    const created = await submit(client, [
      line("fine", "say something"),
      line("500", "answer with 500"),
      line("dropped", "drop the connection"),
    ]);
    const done = await waitFor(client, created.id, finished);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 3, completed: 1, failed: 2 });
    expect(done.usage).toMatchObject({ input_tokens: 3, output_tokens: 2 });
    expect(Object.fromEntries(sent)).toEqual({
      "say something": 1,
      "answer with 500": MAX_LINE_ATTEMPTS,
      "drop the connection": MAX_LINE_ATTEMPTS,
    });
    expect((await linesOf(client, done.output_file_id)).map((l) => l.custom_id)).toEqual(["fine"]);
    const errors = await linesOf(client, done.error_file_id);
    expect(errors.map((l) => l.custom_id)).toEqual(["500", "dropped"]);
    expect(errors[0]).toMatchObject({
      error: null,
      response: {
        status_code: 500,
        body: { error: { message: "boom", type: "server_error", code: null } },
      },
    });
    expect(errors[1]).toMatchObject({
      response: null,
      error: {
        code: "upstream_error",
        message: "The runtime of model 'breakable' failed to answer.",
      },
    });
  }, 60_000);
});
