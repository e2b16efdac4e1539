import { describe, expect, it } from "vitest";
import { inferenceModelSchema } from "../../crds/inference-model.js";
import { CRD_EXTENSIONS, inferenceModelOpenApiSchema } from "../../crds/to-crd.js";
import { invalid, valid, withSpec } from "./agreement-table.js";
import { kubeValidator } from "./kube-validator.js";

/**
 * The zod schema and the generated CRD schema must judge every object the
 * same way: the gateway's file registry and the operator parse with zod, the
 * API server validates with the CRD. A row that disagrees means one of the
 * two twins lost a rule (most likely a refine without its CEL rule).
 */
const kube = kubeValidator(inferenceModelOpenApiSchema());

describe("zod and the CRD schema agree", () => {
  it.each(valid)("both accept %s", (_name, object) => {
    expect(inferenceModelSchema.safeParse(object).error).toBeUndefined();
    expect(kube(object)).toEqual({ ok: true });
  });

  it.each(invalid)("both reject %s", (_name, object) => {
    expect(inferenceModelSchema.safeParse(object).success).toBe(false);
    expect(kube(object).ok).toBe(false);
  });

  it("the CEL rule and the zod refine say the same thing at the same field", () => {
    const object = withSpec({ autoscaling: { minReplicas: 5, maxReplicas: 2 } });
    const issues = inferenceModelSchema.safeParse(object).error?.issues ?? [];
    const [rule] = CRD_EXTENSIONS["spec.autoscaling"]?.["x-kubernetes-validations"] as {
      message: string;
      fieldPath: string;
    }[];
    expect(issues).toHaveLength(1);
    expect(issues[0]?.message).toBe(rule?.message);
    expect(issues[0]?.path).toEqual([
      "spec",
      "autoscaling",
      ...(rule?.fieldPath ?? "").split(".").slice(1),
    ]);
    // The schema part alone passes: only CEL catches it, as only the refine does in zod.
    expect(kube(object)).toEqual({
      ok: false,
      errors: [`.spec.autoscaling.minReplicas: ${rule?.message}`],
    });
  });
});
