import { describe, expect, it } from "vitest";
import { API_VERSION, KIND } from "../../crds/inference-model.js";
import { checkSpec } from "../../operator/spec-check.js";
import { makeModel } from "./model-fixture.js";

/** Specs that pass the CRD schema but cannot work are reported, never thrown. */
describe("checkSpec: rules the schema cannot say", () => {
  const valid: [string, Record<string, unknown>][] = [
    ["hf", { source: { uri: "hf://org/name@main" } }],
    ["hf with revision", { source: { uri: "hf://org/name", revision: "abc123" } }],
    ["https", { source: { uri: "https://models.example/smollm/" } }],
    ["http", { source: { uri: "http://127.0.0.1:9000/smollm" } }],
    ["s3", { source: { uri: "s3://bucket/prefix/smollm" } }],
    ["file", { source: { uri: "file:///var/models/smollm" } }],
    [
      "requests equal to limits",
      {
        resources: {
          requests: { cpu: "1000m", memory: "1Gi" },
          limits: { cpu: "1", memory: "1024Mi" },
        },
      },
    ],
  ];
  it.each(valid)("%s is valid", (_, spec) => {
    const model = makeModel({ spec });
    expect(checkSpec(model)).toEqual({
      valid: true,
      ref: { metadata: model.metadata },
      model,
      status: undefined,
      problems: [],
    });
  });

  const invalid: [string, Record<string, unknown>, RegExp][] = [
    [
      "pvc://",
      { source: { uri: "pvc://claim/path" } },
      /"pvc:\/\/" is not supported.*pvc:\/\/ sources are not supported yet/,
    ],
    [
      "gs://",
      { source: { uri: "gs://bucket/x" } },
      /spec\.source\.uri: source scheme "gs:\/\/" is not supported/,
    ],
    ["not a URI", { source: { uri: "models/smollm" } }, /spec\.source\.uri: .*is not a URI/],
    [
      "a bad hf repository",
      { source: { uri: "hf://just-a-name" } },
      /not a Hugging Face repository/,
    ],
    [
      "revision on s3",
      { source: { uri: "s3://bucket/p", revision: "v1" } },
      /revision applies to hf:\/\/ sources only, not s3:\/\//,
    ],
    [
      "cpu request above limit",
      { resources: { requests: { cpu: "2" }, limits: { cpu: "1500m" } } },
      /spec\.resources\.requests\.cpu \(2\) exceeds spec\.resources\.limits\.cpu \(1500m\)/,
    ],
    [
      "memory request above limit",
      { resources: { requests: { memory: "2Gi" }, limits: { memory: "2000Mi" } } },
      /requests\.memory/,
    ],
  ];
  it.each(invalid)("%s is refused, naming the field", (_, spec, message) => {
    const model = makeModel({ generation: 3, spec });
    const verdict = checkSpec(model);
    expect(verdict).toMatchObject({ valid: false, model, ref: { metadata: model.metadata } });
    expect(verdict.problems).toHaveLength(1);
    expect(verdict.problems[0]).toMatch(message);
  });

  it("reports every problem at once", () => {
    const verdict = checkSpec(
      makeModel({
        spec: {
          source: { uri: "pvc://claim" },
          resources: { requests: { cpu: "2" }, limits: { cpu: "1" } },
        },
      }),
    );
    expect(verdict.problems).toEqual([
      expect.stringMatching(/^spec\.source\.uri: /),
      expect.stringMatching(/^spec\.resources\.requests\.cpu /),
    ]);
  });

  it("never prints the query string of a source URI (pre-signed URLs carry secrets there)", () => {
    const verdict = checkSpec(makeModel({ spec: { source: { uri: "ftp://h/m?sig=secret" } } }));
    expect(verdict.problems.join()).not.toContain("secret");
  });
});

/**
 * An object the CRD's schema refuses can still be in the API server: it was
 * stored before the CRD tightened a rule. It is judged, not skipped.
 */
describe("checkSpec: objects that fail the schema", () => {
  const stored = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: "old", namespace: "models", uid: "u-1", generation: 7 },
    spec,
    ...extra,
  });

  it("names every field the schema refuses, and keeps the metadata for the status", () => {
    const verdict = checkSpec(
      stored({
        task: "translation",
        source: { uri: "hf://org/m", checksums: { "model.onnx": "not-a-digest" } },
      }),
    );
    expect(verdict).toMatchObject({
      valid: false,
      model: undefined,
      ref: { metadata: { name: "old", namespace: "models", uid: "u-1", generation: 7 } },
    });
    expect(verdict.problems).toEqual([
      expect.stringMatching(/^spec\.task: /),
      "spec.source.checksums.model.onnx: must be a lowercase sha256 hex digest",
    ]);
  });

  it("keeps the status it carries when that still parses", () => {
    const status = { replicas: 2, readyReplicas: 2 };
    expect(checkSpec(stored({ task: "x" }, { status })).status).toEqual(status);
    expect(
      checkSpec(stored({ task: "x" }, { status: { replicas: "two" } })).status,
    ).toBeUndefined();
  });

  it("caps a long list of schema problems", () => {
    const tolerations = Array.from({ length: 12 }, () => ({ operator: "Sometimes" }));
    const verdict = checkSpec(stored({ ...makeModel().spec, scheduling: { tolerations } }));
    expect(verdict.problems).toHaveLength(11);
    expect(verdict.problems.at(-1)).toBe("and 2 more schema problems");
  });
});
