import { describe, expect, it } from "vitest";
import { validateSpecSemantics } from "../../operator/status.js";
import { makeModel } from "./model-fixture.js";

/** Specs that pass the CRD schema but cannot work are reported, never thrown. */
describe("validateSpecSemantics", () => {
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
    expect(validateSpecSemantics(makeModel({ spec }))).toBeNull();
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
  it.each(invalid)("%s is Degraded/InvalidSpec", (_, spec, message) => {
    const condition = validateSpecSemantics(makeModel({ generation: 3, spec }));
    expect(condition).toMatchObject({
      type: "Degraded",
      status: "True",
      reason: "InvalidSpec",
      observedGeneration: 3,
    });
    expect(condition?.message).toMatch(message);
  });

  it("reports every problem at once", () => {
    const condition = validateSpecSemantics(
      makeModel({
        spec: {
          source: { uri: "pvc://claim" },
          resources: { requests: { cpu: "2" }, limits: { cpu: "1" } },
        },
      }),
    );
    expect(condition?.message.split("; spec.")).toHaveLength(2);
  });
});
