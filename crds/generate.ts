import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { CHART_CRD_DIR, CRD_FILE, renderCrdYaml } from "./crd-yaml.js";

/**
 * Writes the InferenceModel CRD YAML and the Helm chart's copy. With --check
 * it writes nothing and exits 1 when a committed copy differs from what the
 * zod schema gives (STYLE convention 1). Once the chart exists its copy is
 * required: a missing chart copy fails the check like a stale one, since
 * `helm install` would then install no CRD at all.
 *
 *   npm run crd:generate      npm run crd:check
 */
const check = process.argv.includes("--check");
const expected = await renderCrdYaml();
const targets = [CRD_FILE];
if (existsSync(dirname(CHART_CRD_DIR))) {
  targets.push(join(CHART_CRD_DIR, "inference-model.crd.yaml"));
}

let stale = 0;
for (const file of targets) {
  const actual = existsSync(file) ? readFileSync(file, "utf8") : "";
  if (actual === expected) continue;
  if (check) {
    stale += 1;
    console.error(`${file} differs from the zod schema (run npm run crd:generate):`);
    console.error(firstDifference(actual, expected));
  } else {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, expected);
    console.log(`wrote ${file}`);
  }
}
if (stale > 0) process.exit(1);

/** The changed lines as one diff-style hunk (common prefix and suffix cut away, long runs elided). */
function firstDifference(actual: string, expected: string): string {
  const a = actual.split("\n");
  const e = expected.split("\n");
  let start = 0;
  while (start < a.length && start < e.length && a[start] === e[start]) start += 1;
  let end = 0;
  while (end < a.length - start && end < e.length - start && a.at(-1 - end) === e.at(-1 - end)) {
    end += 1;
  }
  const shown = (lines: string[], sign: string): string[] => {
    const changed = lines.slice(start, lines.length - end).map((line) => `${sign} ${line}`);
    return changed.length > 12
      ? [...changed.slice(0, 12), `${sign} ... ${changed.length - 12} more`]
      : changed;
  };
  return [`@@ line ${start + 1} @@`, ...shown(a, "-"), ...shown(e, "+")].join("\n");
}
