import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PII_MODEL, piiModelPath, startPlatform, type Platform } from "../support/platform.js";
import { GEN, expectFailedEnvelope, read, until, type Json } from "./support.js";

/**
 * Entity extraction through a listening gateway, on the real rampart-pii
 * model: the answer on both routes, bad options refused at the gateway
 * (the runtime never sees them), and the same keys taken as plain metadata
 * by a generation model.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

const SENTENCE = "John Smith lives in Paris and his email is john@example.com";
const EXTRACT = { model: PII_MODEL, input: SENTENCE };

type Annotation = Json & { label: string; start_index: number; end_index: number };
function messageOf(body: Json): { text: string; annotations: Annotation[] } {
  const output = body.output as Array<{
    content: Array<{ text: string; annotations: Annotation[] }>;
  }>;
  expect(output).toHaveLength(1);
  return output[0]!.content[0]!;
}

/** Requests the PII runtime has answered, from its own metrics. */
async function runtimeRequests(): Promise<number> {
  const metric = await p.runtimes.pii!.metrics.requests.get();
  return metric.values.reduce((sum, v) => sum + v.value, 0);
}

describe.skipIf(!piiModelPath)("entity extraction through the gateway", () => {
  it.each(["api-key", "pay"] as const)(
    "answers on the %s route with the input and its entities, metered",
    async (route) => {
      const body = { ...EXTRACT, metadata: { threshold: "0.5", team: "core" } };
      const answer = await read(route === "api-key" ? p.api(body) : p.pay(body));
      expect(answer.status).toBe(200);
      expect(answer.body.status).toBe("completed");
      expect(answer.body.metadata).toEqual({ team: "core" });
      const message = messageOf(answer.body);
      expect(message.text).toBe(SENTENCE);
      expect(message.annotations.map((a) => [a.label, a.start_index, a.end_index, a.text])).toEqual(
        [
          ["GIVEN_NAME", 0, 4, "John"],
          ["SURNAME", 5, 10, "Smith"],
          ["EMAIL", 43, 59, "john@example.com"],
        ],
      );
      expect(answer.body.usage).toMatchObject({ input_tokens: 14, output_tokens: 0 });
      if (route === "api-key") {
        const id = answer.body.id as string;
        await until("the usage record", () => p.sink.counted.has(id));
      }
    },
  );

  it("masks on request", async () => {
    const answer = await read(p.api({ ...EXTRACT, metadata: { usecase: "pii" } }));
    expect(answer.status).toBe(200);
    expect(messageOf(answer.body).text).toBe(
      "[GIVEN_NAME] [SURNAME] lives in Paris and his email is [EMAIL]",
    );
  });

  it.each<[Record<string, string>, string]>([
    [{ threshold: "2" }, "metadata.threshold"],
    [{ mask: "yes" }, "metadata.mask"],
    [{ mask: "true", replacement_char: "xyz" }, "metadata.replacement_char"],
    [{ labels: "[EMAIL,,PHONE]" }, "metadata.labels"],
    [{ usecase: "everything" }, "metadata.usecase"],
    [{ schema: "not json" }, "metadata.schema"],
  ])("refuses %j at the gateway naming %s", async (metadata, param) => {
    const before = await runtimeRequests();
    const answer = await read(p.api({ ...EXTRACT, metadata }));
    expectFailedEnvelope(answer, { status: 400, code: "invalid_request", param });
    expect(await runtimeRequests()).toBe(before);
  });

  it("passes the model's own label check through: an unknown label lists the model's labels", async () => {
    const answer = await read(p.api({ ...EXTRACT, metadata: { labels: "EMAIL, NICKNAME" } }));
    expectFailedEnvelope(answer, {
      status: 400,
      code: "invalid_request",
      param: "metadata.labels",
    });
    expect(String((answer.body.error as Json).message)).toContain("GIVEN_NAME");
  });

  it("lets a generation model take the same keys as plain metadata", async () => {
    const answer = await read(
      p.api({ ...GEN, metadata: { threshold: "2", mask: "yes", team: "core" } }),
    );
    expect(answer.status).toBe(200);
    expect(answer.body.metadata).toEqual({ team: "core" });
  });
});
