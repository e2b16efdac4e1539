import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { FileSource } from "../../../gateway/registry/file-source.js";
import { FREE, ModelRegistry } from "../../../gateway/registry/registry.js";

function model(name: string, extra = ""): string {
  return `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: ${name}\nspec:\n  task: text-generation\n  source: { uri: "hf://org/${name}" }\n${extra}status:\n  endpoint: http://127.0.0.1:9/${name}\n`;
}

async function until(check: () => boolean, ms = 3_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let source: FileSource | undefined;
afterEach(() => source?.stop());

describe("the registry's file source", () => {
  it("loads every valid InferenceModel, with defaults from the CRD schema", async () => {
    const dir = await mkdtemp(join(tmpdir(), "models-"));
    await writeFile(
      join(dir, "a.yaml"),
      `${model("alpha")}---\n${model("beta", "  model: beta-v2\n  routes: [pay]\n  timeoutSeconds: 5\n")}`,
    );
    const registry = new ModelRegistry();
    source = new FileSource({ dir, registry, logger: pino({ level: "silent" }) });
    await source.start();
    expect(registry.resolve("alpha")).toMatchObject({
      id: "alpha",
      key: "default/alpha",
      timeoutMs: 30_000,
      routes: new Set(["api-key", "pay"]),
    });
    expect(registry.resolve("beta-v2")).toMatchObject({
      routes: new Set(["pay"]),
      timeoutMs: 5_000,
      endpoints: ["http://127.0.0.1:9/beta"],
    });
    expect(registry.resolve("beta")).toBeUndefined();
  });

  it("skips a bad document with its file and field, and serves the rest", async () => {
    const dir = await mkdtemp(join(tmpdir(), "models-"));
    await writeFile(join(dir, "good.yaml"), model("good"));
    await writeFile(join(dir, "bad.yaml"), model("bad", "  replicas: -1\n"));
    const lines: string[] = [];
    const registry = new ModelRegistry();
    source = new FileSource({
      dir,
      registry,
      logger: pino({}, { write: (l: string) => void lines.push(l) }),
    });
    const result = await source.start();
    expect(registry.list().map((m) => m.id)).toEqual(["good"]);
    expect(result.problems).toEqual([
      { file: "bad.yaml#1", message: expect.stringMatching(/^spec\.replicas: /) as unknown },
    ]);
    expect(lines.join()).toContain("bad.yaml#1");
  });

  it("picks up added, changed and removed models without a restart", async () => {
    const dir = await mkdtemp(join(tmpdir(), "models-"));
    await writeFile(join(dir, "a.yaml"), model("alpha"));
    const registry = new ModelRegistry();
    source = new FileSource({ dir, registry, logger: pino({ level: "silent" }) });
    await source.start();
    await writeFile(join(dir, "b.yaml"), model("beta"));
    await until(() => registry.resolve("beta") !== undefined);
    await writeFile(join(dir, "a.yaml"), model("alpha", "  routes: [pay]\n"));
    await until(() => registry.resolve("alpha")?.routes.has("api-key") === false);
    await writeFile(join(dir, "b.yaml"), "");
    await until(() => registry.resolve("beta") === undefined);
  });

  it("routes one id to one object: the first in key order wins a clash", () => {
    const registry = new ModelRegistry();
    const base = {
      task: "text-generation" as const,
      routes: new Set(["api-key" as const]),
      timeoutMs: 1,
      maxTokens: undefined,
      overflow: "truncate" as const,
      serviceSlug: "s",
      prices: FREE,
      endpoints: [],
      created: 0,
    };
    registry.replaceAll([
      { ...base, id: "same", key: "ns-b/x" },
      { ...base, id: "same", key: "ns-a/x" },
    ]);
    expect(registry.resolve("same")?.key).toBe("ns-a/x");
    expect(registry.conflicts).toEqual(["same"]);
  });
});
