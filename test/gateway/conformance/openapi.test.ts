import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { piiModelPath, startPlatform, type Platform } from "../support/platform.js";
import { read, type Json } from "./support.js";

/**
 * `GET /openapi.json`: the interface description the gateway serves, checked
 * against the spec: both paths, every status each route answers, the
 * response headers of section 4, and the ResponsesRequest of section 2.1.
 */
let p: Platform;
let doc: Json;
beforeAll(async () => {
  p = await startPlatform();
  const answer = await read(fetch(`${p.url}/openapi.json`));
  expect(answer.status).toBe(200);
  doc = answer.body;
});
afterAll(async () => p?.close());

const PATHS = { "api-key": "/v1/responses", pay: "/pay/v1/responses" } as const;
type Route = keyof typeof PATHS;
const USAGE_PATHS = ["/v1/organization/usage/completions", "/v1/organization/costs"];
/** Documented in their own tests (test/gateway/batch/). */
const FILES_AND_BATCH_PATHS = [
  "/v1/files",
  "/v1/files/{file_id}",
  "/v1/files/{file_id}/content",
  "/v1/batches",
  "/v1/batches/{batch_id}",
  "/v1/batches/{batch_id}/cancel",
];
const op = (route: Route) => ((doc.paths as Json)[PATHS[route]] as Json).post as Json;
const responses = (route: Route) => op(route).responses as Record<string, Json>;
const headerNames = (route: Route, status: number) =>
  Object.keys((responses(route)[String(status)]?.headers as Json | undefined) ?? {});

/** The statuses each route answers (spec 4.1, 4.2, 7), as observed in the rest of this suite. */
const STATUSES: Record<Route, number[]> = {
  "api-key": [200, 400, 401, 403, 408, 420, 429, 500, 502, 503],
  pay: [200, 400, 401, 402, 408, 420, 429, 500, 502, 503],
};

/** Every field of spec 2.1. */
const FIELDS = [
  "model",
  "input",
  "instructions",
  "max_output_tokens",
  "parallel_tool_calls",
  "previous_response_id",
  "store",
  "temperature",
  "top_p",
  "truncation",
  "categories",
  "multilingual",
  "metadata",
  "text",
];

describe("openapi · the document", () => {
  it("openapi · is OpenAPI 3.1.0 with info", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(typeof (doc.info as Json).title).toBe("string");
    expect(typeof (doc.info as Json).version).toBe("string");
  });

  it("openapi · 4 · documents the model paths, the stored-response paths, the usage paths, the models list, and the Files and Batch paths", () => {
    const stored = (prefix: string) => [
      `${prefix}/v1/responses/{response_id}`,
      `${prefix}/v1/responses/{response_id}/input_items`,
      `${prefix}/v1/responses/{response_id}/cancel`,
    ];
    expect(Object.keys(doc.paths as Json).sort()).toEqual(
      [
        ...Object.values(PATHS),
        ...stored(""),
        ...stored("/pay"),
        ...USAGE_PATHS,
        "/v1/models",
        "/v1/models/{model}",
        ...FILES_AND_BATCH_PATHS,
      ].sort(),
    );
    expect(op("api-key")).toBeDefined();
    expect(op("pay")).toBeDefined();
  });

  it.each(USAGE_PATHS)(
    "openapi · %s takes its query parameters as the handler reads them",
    (path) => {
      const get = ((doc.paths as Json)[path] as Json).get as Json;
      expect(get.security).toEqual([{ apiKey: [] }]);
      const params = new Map(
        (get.parameters as Json[])
          .filter((p) => p.in === "query")
          .map((p) => [p.name as string, p]),
      );
      expect(params.get("start_time")).toMatchObject({
        required: true,
        schema: { type: "integer" },
      });
      expect(params.get("end_time")).toMatchObject({ required: false });
      expect(params.get("group_by")).toMatchObject({
        style: "form",
        explode: true,
        schema: { type: "array" },
      });
      expect(Object.keys((get.responses as Json) ?? {})).toEqual(
        expect.arrayContaining(["200", "400", "401", "403", "429", "503"]),
      );
    },
  );

  it.each<[Route, string, string]>([
    ["api-key", "x-api-key", "apiKey"],
    ["pay", "pay-signature", "paySignature"],
  ])("openapi · 5 · %s route is secured by the %s header", (route, header, scheme) => {
    expect(op(route).security).toEqual([{ [scheme]: [] }]);
    const schemes = (doc.components as Json).securitySchemes as Record<string, Json>;
    expect(schemes[scheme]).toMatchObject({ type: "apiKey", in: "header", name: header });
  });

  it.each<[Route, string]>([
    ["api-key", "x-project-id"],
    ["pay", "pay-request-id"],
    ["pay", "pay-agent-id"],
  ])("openapi · 2.1 · %s route documents the optional %s header", (route, name) => {
    const params = op(route).parameters as Json[];
    expect(params.find((param) => param.name === name)).toMatchObject({
      in: "header",
      required: false,
    });
  });

  it("openapi · links · what a create returns leads to the operations its id opens", () => {
    // Every operation by id, with the path parameters it takes.
    const operations = new Map<string, string[]>();
    for (const item of Object.values(doc.paths as Record<string, Record<string, Json>>))
      for (const operation of Object.values(item)) {
        const params = (operation.parameters as Json[] | undefined) ?? [];
        const inPath = params.filter((param) => param.in === "path").map((param) => param.name);
        operations.set(operation.operationId as string, inPath as string[]);
      }
    const linksOf = (path: string) => {
      const created = (((doc.paths as Json)[path] as Json).post as Json).responses as Json;
      return (created["200"] as Json).links as Record<string, Json>;
    };
    const expected: Record<string, string[]> = {
      "/v1/responses": ["getResponse", "listInputItems", "deleteResponse", "cancelResponse"],
      "/pay/v1/responses": [
        "getResponsePaid",
        "listInputItemsPaid",
        "deleteResponsePaid",
        "cancelResponsePaid",
      ],
      "/v1/files": ["retrieveFile", "retrieveFileContent", "deleteFile", "createBatch"],
      "/v1/batches": ["retrieveBatch", "cancelBatch"],
    };
    for (const [path, targets] of Object.entries(expected)) {
      const links = Object.values(linksOf(path));
      expect(links.map((link) => link.operationId)).toEqual(targets);
      for (const link of links) {
        // An uploaded file's id feeds a batch's body, not a path.
        if (link.operationId === "createBatch") {
          expect(link.requestBody).toEqual({ input_file_id: "$response.body#/id" });
          continue;
        }
        const params = operations.get(link.operationId as string);
        expect(params, `${String(link.operationId)} is an operation`).toBeDefined();
        expect(Object.keys(link.parameters as Json)).toEqual(params);
        expect(Object.values(link.parameters as Json)).toEqual(["$response.body#/id"]);
      }
    }
  });

  it("openapi · 5.2 · the payment route documents no x-api-key", () => {
    const params = op("pay").parameters as Json[];
    expect(params.some((param) => param.name === "x-api-key")).toBe(false);
    expect(op("pay").security).not.toContainEqual({ apiKey: [] });
  });
});

describe("openapi · statuses and headers", () => {
  it.each(
    (["api-key", "pay"] as const).flatMap((route) =>
      STATUSES[route].map((status) => [route, status] as const),
    ),
  )("openapi · 7 · %s route documents %i", (route, status) => {
    expect(responses(route)[String(status)]).toBeDefined();
    expect(typeof responses(route)[String(status)]!.description).toBe("string");
  });

  it.each(
    (["api-key", "pay"] as const).flatMap((route) =>
      STATUSES[route].map((status) => [route, status] as const),
    ),
  )("openapi · 4.2 · %s route documents x-request-id on %i", (route, status) => {
    expect(headerNames(route, status)).toContain("x-request-id");
  });

  it.each<Route>(["api-key", "pay"])(
    "openapi · 4.2 · %s route documents x-inference-type on 200",
    (route) => {
      expect(headerNames(route, 200)).toContain("x-inference-type");
    },
  );

  it("openapi · 4.2 · the payment route documents pay-usage on 200, and not on errors", () => {
    expect(headerNames("pay", 200)).toContain("pay-usage");
    for (const status of STATUSES.pay.filter((s) => s !== 200)) {
      expect(headerNames("pay", status)).not.toContain("pay-usage");
    }
    expect(headerNames("api-key", 200)).not.toContain("pay-usage");
  });

  it.each(
    (["api-key", "pay"] as const).flatMap((route) => [429, 503].map((s) => [route, s] as const)),
  )("openapi · 7 · %s route documents retry-after on %i", (route, status) => {
    expect(headerNames(route, status)).toContain("retry-after");
  });

  it("openapi · 2.4 · the payment route's 401 body is PaymentSignatureError", () => {
    const schema = ((responses("pay")["401"]!.content as Json)["application/json"] as Json)
      .schema as Json;
    expect(schema).toMatchObject({
      type: "object",
      properties: { error: { const: "invalid_pay_signature" } },
      required: ["error"],
    });
  });

  it.each<Route>(["api-key", "pay"])(
    "openapi · 7 · %s route's 500 body is the opaque internal_error",
    (route) => {
      const schema = ((responses(route)["500"]!.content as Json)["application/json"] as Json)
        .schema as Json;
      const error = (schema.properties as Json).error as Json;
      expect(error.properties).toMatchObject({
        type: { const: "internal_error" },
        message: { const: "Internal error" },
      });
    },
  );
});

describe("openapi · 2.1 · the request body schema", () => {
  const bodySchema = (route: Route) =>
    (((op(route).requestBody as Json).content as Json)["application/json"] as Json).schema as Json;
  const variants = (route: Route) => bodySchema(route).oneOf as Json[];
  const variant = (route: Route, title: string) => variants(route).find((v) => v.title === title)!;
  /** The text-generation variant: the general ResponsesRequest of spec 2.1. */
  const body = (route: Route) => variant(route, "Text generation request");
  const props = (route: Route) => body(route).properties as Record<string, Json>;
  /**
   * A nullable field's schema without its null: zod writes `T | null` as
   * `anyOf: [T, {type: "null"}]`, or for a plain type `type: [T, "null"]`.
   */
  const nonNull = (schema: Json): Json => {
    const members = schema.anyOf as Json[] | undefined;
    if (members) {
      expect(members).toContainEqual({ type: "null" });
      return { ...schema, ...members.find((member) => member.type !== "null")! };
    }
    expect(schema.type).toEqual(expect.arrayContaining(["null"]));
    return { ...schema, type: (schema.type as string[]).find((type) => type !== "null") };
  };
  /** Every `model` enum of the classifier variant, wherever its combinators put the object. */
  const classifierModels = (route: Route) => {
    const enums: string[][] = [];
    const walk = (schema: Json) => {
      const model = (schema.properties as Json | undefined)?.model as Json | undefined;
      if (model) enums.push((model.enum as string[] | undefined) ?? []);
      for (const key of ["allOf", "anyOf", "oneOf"]) {
        for (const member of (schema[key] as Json[] | undefined) ?? []) walk(member);
      }
    };
    walk(variant(route, "Zero-shot classification request"));
    expect(enums.length).toBeGreaterThan(0);
    return [...new Set(enums.map((e) => JSON.stringify(e)))].map((e) => JSON.parse(e) as string[]);
  };

  it.each<Route>(["api-key", "pay"])(
    "openapi · 2.1 · %s · the body is one of the task variants, each naming its models",
    (route) => {
      expect(variants(route).map((v) => v.title)).toEqual([
        "Text generation request",
        "Zero-shot classification request",
        ...(piiModelPath ? ["Entity extraction request"] : []),
      ]);
      const generators = props(route).model!.enum as string[];
      // The registry of the platform, live: routes restrict which models each path lists.
      expect(generators).toContain("tiny-gpt");
      expect(generators).not.toContain("tiny-nli");
      expect(generators).toContain(route === "api-key" ? "tiny-gpt-api" : "tiny-gpt-pay");
      expect(generators).not.toContain(route === "api-key" ? "tiny-gpt-pay" : "tiny-gpt-api");
      // Every place the classifier variant names a model, it names only classifiers.
      expect(classifierModels(route)).toEqual([["tiny-nli"]]);
    },
  );

  it.each<Route>(["api-key", "pay"])(
    "openapi · 2.1 · %s · model and input are required",
    (route) => {
      expect(body(route).required).toEqual(expect.arrayContaining(["model", "input"]));
      expect(props(route).model).toMatchObject({ type: "string" });
      // A string, or a list of message items as the OpenAI clients send a conversation.
      const input = JSON.stringify(props(route).input);
      expect(input).toContain('"type":"string"');
      expect(input).toContain('"type":"array"');
    },
  );

  it.each((["api-key", "pay"] as const).flatMap((route) => FIELDS.map((f) => [route, f] as const)))(
    "openapi · 2.1 · %s · documents %s",
    (route, field) => {
      expect(props(route)[field]).toBeDefined();
    },
  );

  it.each<Route>(["api-key", "pay"])(
    "openapi · 2.1 · %s · unknown extra properties are allowed",
    (route) => {
      expect(body(route).additionalProperties).not.toBe(false);
    },
  );

  it("openapi · 2.1 · defaults and allowed values are documented", () => {
    const p1 = props("api-key");
    // Optional fields take null as not given, as the OpenAI API does: each is nullable.
    expect(nonNull(p1.parallel_tool_calls!)).toMatchObject({ type: "boolean", default: true });
    expect(nonNull(p1.store!)).toMatchObject({ type: "boolean", default: true });
    expect(nonNull(p1.truncation!)).toMatchObject({ default: "auto" });
    expect((nonNull(p1.truncation!).enum as string[]).sort()).toEqual(["auto", "disabled"]);
    expect(p1.categories).toMatchObject({ type: "array", items: { type: "string" } });
    expect(p1.multilingual).toMatchObject({ type: "boolean" });
    expect(nonNull(p1.metadata!)).toMatchObject({ type: "object" });
    expect(nonNull(p1.instructions!)).toMatchObject({ type: "string" });
    const format = ((nonNull(p1.text!).properties as Json).format as Json).properties as Json;
    expect(format.type).toMatchObject({ enum: ["text"] });
  });

  it("openapi · 2.1 · says exactly what is accepted: metadata pairs, string values, the output cap", () => {
    const p1 = props("api-key");
    // Spec 2.1: "object, string values", at most 16 pairs, keys up to 64.
    expect(nonNull(p1.metadata!)).toMatchObject({
      maxProperties: 16,
      propertyNames: { maxLength: 64 },
      additionalProperties: { type: "string", maxLength: 512 },
    });
    expect(JSON.stringify(p1.max_output_tokens)).toContain('"maximum":2147483647');
    expect(JSON.stringify(p1.stream)).toContain('"boolean"');
  });

  it("openapi · streaming · a 200 may be text/event-stream, its events described", () => {
    for (const route of ["/v1/responses", "/pay/v1/responses"]) {
      const ok = (((doc.paths as Json)[route] as Json).post as Json).responses as Json;
      const content = (ok["200"] as Json).content as Json;
      expect(Object.keys(content).sort()).toEqual(["application/json", "text/event-stream"]);
      // Each event is one SSE frame whose data line is the event as JSON.
      const frame = (content["text/event-stream"] as Json).schema as Json;
      expect(frame.required).toEqual(["data"]);
      const data = (frame.properties as Json).data as Json;
      expect([data.type, data.contentMediaType]).toEqual(["string", "application/json"]);
      const events = JSON.stringify(data.contentSchema);
      for (const type of ["response.created", "response.output_text.delta", "response.completed"]) {
        expect(events).toContain(type);
      }
    }
  });
});
