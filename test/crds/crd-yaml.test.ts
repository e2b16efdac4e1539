import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CRD_FILE, renderCrdYaml } from "../../crds/crd-yaml.js";
import { inferenceModelCrd } from "../../crds/to-crd.js";

/**
 * Drift: the committed CRD YAML is exactly what the zod schema gives. It
 * fails when either twin is edited alone; `npm run crd:generate` fixes it.
 */
describe("crds/inference-model.crd.yaml", () => {
  it("equals the freshly generated YAML", async () => {
    const expected = await renderCrdYaml();
    const committed = readFileSync(CRD_FILE, "utf8");
    expect(committed, "run npm run crd:generate").toBe(expected);
  });

  it("reads back as the CRD object (no quoting surprises such as True becoming a boolean)", async () => {
    expect(parse(await renderCrdYaml())).toEqual(inferenceModelCrd());
  });

  it("says it is generated", () => {
    expect(readFileSync(CRD_FILE, "utf8").split("\n")[0]).toBe(
      "# generated from crds/inference-model.ts by crds/generate.ts; do not edit",
    );
  });
});
