import { format, resolveConfig } from "prettier";
import { stringify } from "yaml";
import { inferenceModelCrd } from "./to-crd.js";

/**
 * The CRD as the YAML that is committed. It is passed through prettier with
 * the repository's settings, so that `npm run format` leaves the generated
 * file as it is and the drift check stays quiet. (Dev-only: prettier is a
 * devDependency; nothing at run time imports this file.)
 */
export const CRD_FILE = "crds/inference-model.crd.yaml";
export const CHART_CRD_DIR = "charts/modelgate/crds";

const HEADER = "# generated from crds/inference-model.ts by crds/generate.ts; do not edit\n";

export async function renderCrdYaml(filePath: string = CRD_FILE): Promise<string> {
  const text = HEADER + stringify(inferenceModelCrd(), { lineWidth: 0 });
  const options = (await resolveConfig(filePath)) ?? {};
  return format(text, { ...options, parser: "yaml" });
}
