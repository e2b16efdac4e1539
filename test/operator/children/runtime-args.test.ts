import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { flagName } from "../../../lib/settings.js";
import { parseServeConfig, serveConfigSchema } from "../../../runtime/config.js";
import { parseFetchArgv } from "../../../runtime/fetch/cli-args.js";
import { fetchArgs, serveArgs, TUNING_FLAGS } from "../../../operator/children/runtime-args.js";
import { makeModel, type ModelInput } from "../model-fixture.js";

/**
 * The operator and the runtime must agree on every flag: these tests feed the
 * builders' argument lists to the runtime's own parsers, so a renamed flag or
 * a value the runtime would reject fails here and not in a crash-looping pod.
 */
const SERVE_FLAGS = Object.fromEntries(
  Object.keys(serveConfigSchema.shape).map((key) => [
    flagName(key).slice(2),
    { type: "string" as const },
  ]),
);

function parseServe(args: readonly string[]) {
  expect(args.slice(0, 2)).toEqual(["runtime", "serve"]);
  const { values } = parseArgs({ args: args.slice(2), options: SERVE_FLAGS, strict: true });
  const byKey: Record<string, unknown> = {};
  for (const key of Object.keys(serveConfigSchema.shape))
    byKey[key] = values[flagName(key).slice(2)];
  return parseServeConfig(byKey, {});
}

describe("TUNING_FLAGS", () => {
  it.each(Object.entries(TUNING_FLAGS))("%s is the runtime's %s", (key, flag) => {
    expect(serveConfigSchema.shape).toHaveProperty(key);
    expect(flag).toBe(flagName(key));
  });
});

const cases: { name: string; input: ModelInput; expected: Record<string, unknown> }[] = [
  {
    name: "minimal",
    input: {},
    expected: {
      modelPath: "/models/smollm",
      modelId: "smollm",
      task: "text-generation",
      overflow: "truncate",
      port: 8080,
      threads: undefined,
    },
  },
  {
    name: "every tuning field",
    input: {
      spec: {
        model: "acme/chat",
        maxTokens: 2048,
        overflow: "error",
        runtime: {
          threads: 4,
          maxBatchSize: 8,
          batchWindowMs: 0,
          generationConcurrency: 2,
          maxQueue: 64,
          zeroShotMethod: "nli",
          hypothesisTemplate: "It is {}.",
          similarityMidpoint: -0.5,
          similaritySteepness: 12.5,
        },
      },
    },
    expected: {
      modelId: "acme/chat",
      maxTokens: 2048,
      overflow: "error",
      threads: 4,
      maxBatchSize: 8,
      batchWindowMs: 0,
      generationConcurrency: 2,
      maxQueue: 64,
      zeroShotMethod: "nli",
      hypothesisTemplate: "It is {}.",
      similarityMidpoint: -0.5,
      similaritySteepness: 12.5,
    },
  },
];

describe("serveArgs", () => {
  it.each(cases)("$name parses back to the spec in the runtime", ({ input, expected }) => {
    expect(parseServe(serveArgs(makeModel(input)))).toMatchObject(expected);
  });
});

describe("fetchArgs", () => {
  it("parses back in the fetch command's own parser", () => {
    const model = makeModel({
      spec: {
        source: {
          uri: "hf://org/name",
          revision: "v1",
          checksums: { "b.json": "b".repeat(64), "a/model.onnx": "a".repeat(64) },
        },
      },
    });
    const args = fetchArgs(model);
    expect(args.slice(0, 2)).toEqual(["runtime", "fetch"]);
    expect(parseFetchArgv(args.slice(2))).toMatchObject({
      source: "hf://org/name",
      dest: "/models/smollm",
      revision: "v1",
      sha256: [`a/model.onnx=${"a".repeat(64)}`, `b.json=${"b".repeat(64)}`],
    });
  });

  it("does not depend on the order checksums were written in", () => {
    const a = makeModel({
      spec: { source: { uri: "s3://b/p", checksums: { x: "1".repeat(64), y: "2".repeat(64) } } },
    });
    const b = makeModel({
      spec: { source: { uri: "s3://b/p", checksums: { y: "2".repeat(64), x: "1".repeat(64) } } },
    });
    expect(fetchArgs(a)).toEqual(fetchArgs(b));
  });
});
