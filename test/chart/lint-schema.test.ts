import { execFile } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { isMap, parseDocument, type Pair, type YAMLMap } from "yaml";
import { describe, expect, it } from "vitest";
import { inferenceModelSchema } from "../../crds/inference-model.js";
import { CHART_DIR, helmPath, renderError } from "./chart-support.js";

/**
 * `helm lint --strict` over every value set, values.schema.json refusing bad
 * values with messages that name the field, the cross-field checks of
 * _helpers.tpl, a `# --` comment on every value, and the examples.
 */
const run = promisify(execFile);
const ciFiles = readdirSync(join(CHART_DIR, "ci")).filter((f) => f.endsWith(".yaml"));

describe("helm lint --strict", () => {
  it.each(["(defaults)", ...ciFiles])("passes with %s", async (file) => {
    const args = ["lint", "--strict", CHART_DIR];
    if (file !== "(defaults)") args.push("--values", join(CHART_DIR, "ci", file));
    const { stdout } = await run(helmPath(), args);
    expect(stdout).toContain("1 chart(s) linted, 0 chart(s) failed");
    expect(stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });
});

describe("values.schema.json", () => {
  it.each([
    [
      "a missing image",
      { "image.repository": "null" },
      "at '/image': missing property 'repository'",
    ],
    [
      "an empty image",
      { "image.repository": "" },
      "at '/image/repository': minLength: got 0, want 1",
    ],
    [
      "a bad pull policy",
      { "image.pullPolicy": "Sometimes" },
      "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",
    ],
    [
      "a port out of range",
      { "gateway.port": 70000 },
      "at '/gateway/port': maximum: got 70,000, want 65,535",
    ],
    ["a zero operator port", { "operator.port": 0 }, "at '/operator/port': minimum: got 0, want 1"],
    [
      "a string for a number",
      { "gateway.replicaCount": "two" },
      "at '/gateway/replicaCount': got string, want integer",
    ],
    [
      "a string for a boolean",
      { "gateway.ingress.enabled": "yes" },
      "at '/gateway/ingress/enabled': got string, want boolean",
    ],
    [
      "a bad Service type",
      { "gateway.service.type": "Internal" },
      "at '/gateway/service/type': value must be one of 'ClusterIP', 'NodePort', 'LoadBalancer'",
    ],
    [
      "a bad log level",
      { "operator.logLevel": "loud" },
      "at '/operator/logLevel': value must be one of",
    ],
    ["a misspelt key", { "gatway.replicaCount": 1 }, "additional properties 'gatway' not allowed"],
    [
      "a journal sync that is not always or a duration",
      { "gateway.journalSync": "often" },
      "at '/gateway/journalSync': 'often' does not match pattern",
    ],
    [
      "a bad watch namespace",
      { watchNamespace: "Models_1" },
      "at '/watchNamespace': 'Models_1' does not match pattern",
    ],
    [
      "a short signing secret",
      { "gateway.pay.signingSecrets.k1": "short" },
      "at '/gateway/pay/signingSecrets/k1': minLength: got 5, want 16",
    ],
    [
      "a key that is not a hash",
      {
        "gateway.apiKeys.keys[0].id": "k",
        "gateway.apiKeys.keys[0].account": "a",
        "gateway.apiKeys.keys[0].hash": "mg_live_x",
      },
      "at '/gateway/apiKeys/keys/0/hash': 'mg_live_x' does not match pattern",
    ],
    [
      "a bad digest",
      { "image.digest": "sha256:xyz" },
      "at '/image/digest': 'sha256:xyz' does not match pattern",
    ],
    [
      "too many workers",
      { "operator.workers": 1000 },
      "at '/operator/workers': maximum: got 1,000, want 64",
    ],
  ])("rejects %s with the field's path", async (_what, set, message) => {
    const stderr = await renderError({ set });
    expect(stderr).toContain("values don't meet the specifications of the schema");
    expect(stderr).toContain(message);
  });

  it("accepts the chart's own values (helm lint above) and documents every one of them with # --", () => {
    const doc = parseDocument(readFileSync(join(CHART_DIR, "values.yaml"), "utf8"));
    const undocumented: string[] = [];
    const documented = (map: YAMLMap, pair: Pair, index: number): boolean => {
      const comment =
        (index === 0 ? map.commentBefore : undefined) ??
        (pair.key as { commentBefore?: string }).commentBefore ??
        "";
      return comment.includes("-- ");
    };
    const walk = (map: YAMLMap, path: string): void => {
      map.items.forEach((pair, index) => {
        const key = `${path}${String((pair.key as { value: unknown }).value)}`;
        if (documented(map, pair, index)) return;
        if (isMap(pair.value)) walk(pair.value, `${key}.`);
        else undocumented.push(key);
      });
    };
    walk(doc.contents as YAMLMap, "");
    expect(undocumented).toEqual([]);
  });
});

describe("cross-field checks", () => {
  it.each([
    [
      "persistence with two replicas",
      { "gateway.persistence.enabled": true, "gateway.replicaCount": 2 },
      "gateway.persistence.enabled needs gateway.replicaCount: 1",
    ],
    [
      "the payment route without a provider",
      { "gateway.pay.enabled": true },
      "gateway.pay.enabled needs gateway.pay.providerUrl",
    ],
    [
      "the payment route without secrets",
      { "gateway.pay.enabled": true, "gateway.pay.providerUrl": "https://pay.test" },
      "gateway.pay.enabled needs gateway.pay.existingSecret, or both gateway.pay.signingSecrets and gateway.pay.providerCredential",
    ],
    [
      "an HTTPRoute without a Gateway",
      { "gateway.httpRoute.enabled": true },
      "gateway.httpRoute.enabled needs at least one entry in gateway.httpRoute.parentRefs",
    ],
    [
      "two operators without leader election",
      { "operator.replicaCount": 2, "operator.leaderElection.enabled": false },
      "operator.replicaCount above 1 needs operator.leaderElection.enabled",
    ],
    [
      "two gateway replicas without a database and Valkey",
      { "gateway.replicaCount": 2 },
      "gateway.replicaCount above 1, or gateway.autoscaling.enabled, needs both gateway.database.existingSecret",
    ],
    [
      "two gateway replicas with Valkey only",
      { "gateway.replicaCount": 2, "gateway.valkey.existingSecret": "acme-valkey" },
      "needs both gateway.database.existingSecret (PostgreSQL, such as a CloudNativePG cluster) and gateway.valkey.existingSecret",
    ],
    [
      "a gateway autoscaler with a database only",
      { "gateway.autoscaling.enabled": true, "gateway.database.existingSecret": "acme-pg-app" },
      "gateway.replicaCount above 1, or gateway.autoscaling.enabled, needs both",
    ],
    [
      "a database CA without a database",
      { "gateway.database.caSecret": "acme-pg-ca" },
      "gateway.database.caSecret is set but gateway.database.existingSecret is empty",
    ],
    [
      "an autoscaler with min above max",
      {
        "gateway.autoscaling.enabled": true,
        "gateway.autoscaling.minReplicas": 5,
        "gateway.autoscaling.maxReplicas": 2,
      },
      "gateway.autoscaling.minReplicas must not exceed gateway.autoscaling.maxReplicas",
    ],
  ])("refuses %s", async (_what, set, message) => {
    expect(await renderError({ set })).toContain(message);
  });
});

describe("examples", () => {
  const dir = join(CHART_DIR, "examples");
  const files = readdirSync(dir).filter((f) => f.endsWith(".yaml"));

  it("has a text-generation and a zero-shot-classification model from hf://", () => {
    const tasks = files.map((f) => {
      const model = inferenceModelSchema.parse(
        parseDocument(readFileSync(join(dir, f), "utf8")).toJS(),
      );
      expect(model.spec.source.uri).toMatch(/^hf:\/\//);
      return model.spec.task;
    });
    expect(tasks.sort()).toEqual(["text-generation", "zero-shot-classification"]);
  });

  it.each(files)("%s has no field the schema does not know", (file) => {
    const input = parseDocument(readFileSync(join(dir, file), "utf8")).toJS() as unknown;
    // zod drops unknown keys: every key written must survive parsing.
    expect(droppedKeys(input, inferenceModelSchema.parse(input), "")).toEqual([]);
  });
});

function droppedKeys(input: unknown, parsed: unknown, path: string): string[] {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return [];
  const out = parsed as Record<string, unknown>;
  return Object.entries(input).flatMap(([key, value]) =>
    key in out ? droppedKeys(value, out[key], `${path}${key}.`) : [`${path}${key}`],
  );
}
