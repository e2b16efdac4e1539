import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOf } from "../../../gateway/metering/cost.js";
import { startPlatform, type Platform } from "../support/platform.js";
import {
  finished,
  gptLine,
  jsonlOf,
  linesOf,
  nliLine,
  openaiClient,
  submit,
  waitFor,
  type InputLine,
} from "./support.js";

/**
 * The Batch API end to end with the official `openai` client: a listening
 * gateway whose batch worker runs the lines against real runtimes, its
 * store the embedded PGlite.
 */
let p: Platform;
let client: OpenAI;
beforeAll(async () => {
  p = await startPlatform({
    withoutPayments: true,
    config: { batchPollMs: 50, batchWorkers: 2 },
  });
  client = openaiClient(p.url, p.keys.acme.key);
});
afterAll(async () => p?.close());

describe("the Batch API with the openai client", () => {
  it("runs a batch: every custom_id has one result, failures in the error file, usage at the batch price", async () => {
    const lines: InputLine[] = [
      gptLine(1),
      nliLine(2),
      gptLine(3),
      // Passes the gateway's validation; the runtime refuses it (420: over maxTokens).
      { custom_id: "too-long", body: { model: "tiny-gpt", input: "x".repeat(400) } },
      nliLine(5),
    ];
    const created = await submit(client, lines, { job: "nightly" });
    expect(created).toMatchObject({
      object: "batch",
      endpoint: "/v1/responses",
      completion_window: "24h",
      status: "validating",
      metadata: { job: "nightly" },
      output_file_id: null,
      error_file_id: null,
      usage: {
        input_tokens: 0,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 0,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 0,
      },
    });
    // Not known until the file is validated; and these lines name two models.
    expect(created).not.toHaveProperty("model");
    expect(created.id).toMatch(/^batch_[0-9a-f]{24}$/);
    expect(created.expires_at! - created.created_at).toBe(86_400);

    const done = await waitFor(client, created.id, finished);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 5, completed: 4, failed: 1 });
    expect(done.errors).toBeNull();
    for (const at of ["in_progress_at", "finalizing_at", "completed_at"] as const) {
      expect(done[at]).toBeGreaterThanOrEqual(created.created_at);
    }

    const output = await linesOf(client, done.output_file_id);
    expect(output.map((line) => line.custom_id)).toEqual(["gpt-1", "nli-2", "gpt-3", "nli-5"]);
    for (const line of output) {
      expect(line.id).toMatch(/^batch_req_[0-9a-f]{24}$/);
      expect(line.error).toBeNull();
      expect(line.response!.status_code).toBe(200);
      // As OpenAI's output lines: the request made for the line has an id of its own.
      expect(line.response!.request_id).toMatch(/^req_[0-9a-f]{32}$/);
    }
    const gpt = output[0]!.response!.body;
    // Kept in the output file only: the answer is not a stored response, and says so.
    expect(gpt).toMatchObject({ object: "response", model: "tiny-gpt", store: false });
    expect(
      (await client.responses.retrieve(gpt.id as string).catch((e: { status: number }) => e))
        .status,
    ).toBe(404);
    expect(gpt.id).toMatch(/^resp_/);
    expect(Object.keys(output[1]!.response!.body)).toEqual(["sports", "cooking"]);

    const errors = await linesOf(client, done.error_file_id);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      custom_id: "too-long",
      error: null,
      response: { status_code: 420, body: { error: { code: "context_length_exceeded" } } },
    });
    const outputFile = await client.files.retrieve(done.output_file_id!);
    expect(outputFile).toMatchObject({
      purpose: "batch_output",
      filename: `${done.id}_output.jsonl`,
    });
    // Without output_expires_after, kept thirty days.
    expect(outputFile.expires_at! - outputFile.created_at).toBe(2_592_000);

    // One ledger row per completed line, as batch usage, at half the model's prices.
    const db = await p.components.store.db();
    const ledger = await db
      .selectFrom("usage_ledger")
      .selectAll()
      .where("route", "=", "/v1/batches")
      .orderBy("request_id")
      .execute();
    expect(ledger.map((row) => row.request_id).sort()).toEqual(
      output.map((l) => l.response!.request_id).sort(),
    );
    const gptRow = ledger.find((row) => row.response_id === gpt.id)!;
    expect(gptRow).toMatchObject({
      account: "acme",
      project: null,
      model: "tiny-gpt",
      currency: "EUR",
    });
    expect(gptRow.key_id).toBe(p.keys.acme.id);
    const tokens = { inputTokens: gpt.usage!.input_tokens, outputTokens: gpt.usage!.output_tokens };
    expect([gptRow.input_tokens, gptRow.output_tokens]).toEqual([
      tokens.inputTokens,
      tokens.outputTokens,
    ]);
    expect(gptRow.cost).toBe(
      costOf(tokens, { inputPerMillionTokens: "1.25", outputPerMillionTokens: "5" }),
    );

    // The batch's usage is its completed lines' tokens, as billed: the
    // classification lines' too, which their answers' bodies do not carry.
    const sum = (of: (row: (typeof ledger)[number]) => number) =>
      ledger.reduce((total, row) => total + of(row), 0);
    const [input, cached, outputTokens] = [
      sum((row) => row.input_tokens),
      sum((row) => row.cached_tokens),
      sum((row) => row.output_tokens),
    ];
    expect(input).toBeGreaterThan(0);
    expect(done.usage).toEqual({
      input_tokens: input,
      input_tokens_details: { cached_tokens: cached },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: input + outputTokens,
    });
    expect(done).not.toHaveProperty("model");

    const listed: string[] = [];
    for await (const batch of client.batches.list({ limit: 1 })) listed.push(batch.id);
    expect(listed).toContain(done.id);
  });

  it("keeps the output and error files for output_expires_after, as OpenAI's Batch API does", async () => {
    const file = await client.files.create({
      file: await toFile(
        jsonlOf([
          gptLine(1),
          { custom_id: "bad", body: { model: "tiny-gpt", input: "x".repeat(400) } },
        ]),
        "input.jsonl",
      ),
      purpose: "batch",
    });
    const create = (seconds: number) =>
      client.batches.create({
        input_file_id: file.id,
        endpoint: "/v1/responses",
        completion_window: "24h",
        output_expires_after: { anchor: "created_at", seconds },
      });
    for (const seconds of [60, 2_592_001]) {
      const refused = await create(seconds).catch(
        (error: { status: number; param: string }) => error,
      );
      expect(refused).toMatchObject({ status: 400, param: "output_expires_after.seconds" });
    }
    const done = await waitFor(client, (await create(7200)).id, finished);
    expect(done.status).toBe("completed");
    // Every line names one model: the batch reports it, as OpenAI's do.
    expect(done.model).toBe("tiny-gpt");
    for (const id of [done.output_file_id, done.error_file_id]) {
      const kept = await client.files.retrieve(id!);
      expect(kept.expires_at! - kept.created_at, id ?? "").toBe(7200);
    }
  });

  it("fails a malformed file before anything runs, listing each bad line and why", async () => {
    const lines = [
      gptLine(1),
      "{not json",
      gptLine(1),
      { ...gptLine(4), url: "/v1/chat/completions" },
      { custom_id: "streams", body: { ...gptLine(5).body, stream: true } },
      { custom_id: "unknown-model", body: { model: "no-such-model", input: "hi" } },
      { custom_id: "no-input", body: { model: "tiny-gpt" } },
      { custom_id: "get", method: "GET", body: gptLine(8).body },
      { custom_id: "pay-only", body: { model: "tiny-gpt-pay", input: "hi" } },
      { custom_id: "continues", body: { ...gptLine(10).body, previous_response_id: "resp_1" } },
    ];
    const created = await submit(client, lines);
    const done = await waitFor(client, created.id, finished);
    expect(done.status).toBe("failed");
    expect(done.failed_at).not.toBeNull();
    expect(done.request_counts).toEqual({ total: 0, completed: 0, failed: 0 });
    expect(done.output_file_id).toBeNull();
    const byLine = Object.fromEntries(
      done.errors!.data!.map((e) => [String(e.line), [e.code, e.param]]),
    );
    expect(byLine).toEqual({
      2: ["invalid_json_line", null],
      3: ["duplicate_custom_id", "custom_id"],
      4: ["invalid_url", "url"],
      5: ["stream_unsupported", "body.stream"],
      6: ["model_not_found", "body.model"],
      7: ["invalid_request", "body.input"],
      8: ["invalid_request", "method"],
      9: ["model_not_found", "body.model"],
      10: ["conversation_unsupported", "body.previous_response_id"],
    });
    for (const error of done.errors!.data!) expect(error.message).toContain(`Line ${error.line}`);
    // Nothing ran: no usage of it.
    const db = await p.components.store.db();
    const lineRows = await db
      .selectFrom("batch_lines")
      .select("line_no")
      .where("batch_id", "=", done.id)
      .execute();
    expect(lineRows).toEqual([]);
  });

  it("keeps metadata holding any character, NUL included, as it was sent", async () => {
    // PostgreSQL's jsonb refuses the \u0000 escape: such metadata was a 500.
    const metadata = { "k\u0000ey": "v\u0000alue", "\u{1F600}": "\u0010 ok" };
    const created = await submit(client, [gptLine(1)], metadata);
    expect(created.metadata).toEqual(metadata);
    expect((await client.batches.retrieve(created.id)).metadata).toEqual(metadata);
    const listed: Array<Record<string, string> | null | undefined> = [];
    for await (const batch of client.batches.list()) {
      if (batch.id === created.id) listed.push(batch.metadata);
    }
    expect(listed).toEqual([metadata]);
    expect((await waitFor(client, created.id, finished)).status).toBe("completed");
  });

  it("fails a file whose lines hold NUL characters with line errors, and does not get stuck", async () => {
    const done = await waitFor(
      client,
      (
        await submit(client, [
          { custom_id: "a\u0000b", body: gptLine(1).body },
          { ...gptLine(2), url: "/v1/\u0000" },
          gptLine(3),
        ])
      ).id,
      finished,
    );
    expect(done.status).toBe("failed");
    const byLine = Object.fromEntries(
      done.errors!.data!.map((e) => [String(e.line), [e.code, e.param]]),
    );
    expect(byLine).toEqual({
      1: ["invalid_request", "custom_id"],
      2: ["invalid_url", "url"],
    });
    // The url is quoted as it was sent.
    expect(done.errors!.data![1]!.message).toContain("/v1/\u0000");
  });

  it("cancels a running batch: cancelling, then cancelled with the finished results kept", async () => {
    const lines = Array.from({ length: 400 }, (_, n) => nliLine(n));
    const created = await submit(client, lines);
    const running = await waitFor(client, created.id, (b) => b.request_counts!.completed >= 3);
    expect(running.status).toBe("in_progress");
    const cancelling = await client.batches.cancel(created.id);
    expect(["cancelling", "cancelled"]).toContain(cancelling.status);
    expect(cancelling.cancelling_at).not.toBeNull();
    const done = await waitFor(client, created.id, finished);
    expect(done.status).toBe("cancelled");
    expect(done.cancelled_at).not.toBeNull();
    const { total, completed, failed } = done.request_counts!;
    expect(total).toBe(400);
    expect(completed).toBeGreaterThanOrEqual(3);
    expect(completed).toBeLessThan(400);
    expect(completed + failed).toBe(400);
    const output = await linesOf(client, done.output_file_id);
    const errors = await linesOf(client, done.error_file_id);
    expect(output).toHaveLength(completed);
    expect(errors.every((line) => line.error?.code === "batch_cancelled")).toBe(true);
    const ids = [...output, ...errors].map((line) => line.custom_id);
    expect(new Set(ids).size).toBe(400);
    // Asking again is answered with the batch as it is.
    expect(await client.batches.cancel(created.id)).toMatchObject({ status: "cancelled" });
  });

  it("another account's batch is a 404, and so is its output", async () => {
    const created = await submit(client, [nliLine(1)]);
    const globex = openaiClient(p.url, p.keys.limited.key);
    const error = await globex.batches.retrieve(created.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error).toMatchObject({ code: "batch_not_found" });
    await expect(globex.batches.cancel(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // Nor may another account run a batch on this account's file.
    const theirs = await globex.batches
      .create({
        input_file_id: created.input_file_id,
        endpoint: "/v1/responses",
        completion_window: "24h",
      })
      .catch((e: unknown) => e);
    expect(theirs).toMatchObject({ status: 404, code: "file_not_found", param: "input_file_id" });
    const done = await waitFor(client, created.id, finished);
    expect(done.status).toBe("completed");
    // A finished batch cannot be cancelled.
    const late = await client.batches.cancel(created.id).catch((e: unknown) => e);
    expect(late).toMatchObject({ status: 400, code: "batch_not_cancellable" });
    await expect(globex.files.content(done.output_file_id!)).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
  });

  it("refuses a bad create request naming the field", async () => {
    const bad = await client.batches
      .create({
        input_file_id: "file-000000000000000000000000",
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      })
      .catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400, param: "endpoint" });
    // An absent field is named as missing, as OpenAI and POST /v1/responses name it.
    const body = {
      input_file_id: "file-000000000000000000000000",
      endpoint: "/v1/responses",
      completion_window: "24h",
    };
    for (const field of Object.keys(body)) {
      const missing = await fetch(`${p.url}/v1/batches`, {
        method: "POST",
        headers: { "x-api-key": p.keys.acme.key, "content-type": "application/json" },
        body: JSON.stringify({ ...body, [field]: undefined }),
      });
      expect(missing.status).toBe(400);
      expect(await missing.json()).toEqual({
        error: {
          message: `Missing required parameter: '${field}'.`,
          type: "invalid_request_error",
          param: field,
          code: "invalid_request",
        },
      });
    }
  });
});
