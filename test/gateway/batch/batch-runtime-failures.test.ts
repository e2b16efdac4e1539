import type OpenAI from "openai";
import { USAGE_HEADERS } from "../../../api/runtime-wire.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_LINE_ATTEMPTS } from "../../../gateway/batch/batch-worker.js";
import { standInRuntime, type StandInRuntime } from "../support/stand-in-runtime.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { finished, linesOf, openaiClient, submit, waitFor } from "./support.js";

/**
 * Batch lines a runtime fails. A line whose request the runtime answers
 * with a 500 every time is sent MAX_LINE_ATTEMPTS times and then failed, so
 * the batch completes; before, it was sent again every second until the
 * 24-hour window ended, and the batch with it. A runtime out of room (503)
 * or dropping the connection (a crash breaks every request it holds, so it
 * says nothing of this one) is not counted: those lines wait for it.
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
    // More tries than MAX_LINE_ATTEMPTS before these two answer.
    const early = (sent.get(input) ?? 0) <= MAX_LINE_ATTEMPTS + 1;
    if (input === "answer with 500") {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "boom", type: "server_error", code: null } }));
    } else if (input === "no room at first" && early) {
      res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
      res.end(JSON.stringify({ error: { message: "busy", type: "server_error", code: null } }));
    } else if (input === "drop the connection at first" && early) {
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

describe("batch lines a runtime fails", () => {
  it(`are failed after ${MAX_LINE_ATTEMPTS} answered 500s, and waited for through 503s and dropped connections`, async () => {
    const created = await submit(client, [
      line("fine", "say something"),
      line("500", "answer with 500"),
      line("503", "no room at first"),
      line("dropped", "drop the connection at first"),
    ]);
    const done = await waitFor(client, created.id, finished);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 4, completed: 3, failed: 1 });
    expect(done.usage).toMatchObject({ input_tokens: 9, output_tokens: 6 });
    expect(Object.fromEntries(sent)).toEqual({
      "say something": 1,
      "answer with 500": MAX_LINE_ATTEMPTS,
      "no room at first": MAX_LINE_ATTEMPTS + 2,
      "drop the connection at first": MAX_LINE_ATTEMPTS + 2,
    });
    expect((await linesOf(client, done.output_file_id)).map((l) => l.custom_id)).toEqual([
      "fine",
      "503",
      "dropped",
    ]);
    const errors = await linesOf(client, done.error_file_id);
    expect(errors.map((l) => l.custom_id)).toEqual(["500"]);
    expect(errors[0]).toMatchObject({
      error: null,
      response: {
        status_code: 500,
        body: { error: { message: "boom", type: "server_error", code: null } },
      },
    });
  }, 60_000);
});
