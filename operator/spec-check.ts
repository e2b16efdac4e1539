import type { KubernetesObject } from "@kubernetes/client-node";
import {
  inferenceModelSchema,
  inferenceModelStatusSchema,
  type InferenceModel,
  type InferenceModelSpec,
  type InferenceModelStatus,
} from "../crds/inference-model.js";
import { parseSourceUri } from "../crds/source-uri.js";
import type { ModelRef } from "./children/owner.js";
import { RESOURCE_NAMES } from "./children/resources.js";

/**
 * Whether a model's spec can be applied, judged once per reconcile: the one
 * home of every check on a spec. Two kinds of problem stop a spec:
 *
 * - it fails the schema. The API server enforces the same schema, so this is
 *   an object stored before the CRD tightened a rule (the API server keeps
 *   such objects and lets their other fields and status be written);
 * - it passes the schema but cannot work: rules a structural schema cannot
 *   say, or that need the source URI grammar.
 *
 * Either way nothing is applied, the problems (each naming its field, all of
 * them at once so one edit can fix them) become Degraded/InvalidSpec, and the
 * status builder reads this verdict rather than checking again. Never throws.
 */

interface VerdictBase {
  /** Name, namespace, uid and generation, read even from an object that fails the schema. */
  ref: ModelRef;
  /** The status the object carries, as far as it parses: what the new one is compared with. */
  status: InferenceModelStatus | undefined;
}

export type SpecVerdict =
  | (VerdictBase & { valid: true; model: InferenceModel; problems: readonly [] })
  | (VerdictBase & {
      valid: false;
      /** Undefined when the object fails the schema. */
      model: InferenceModel | undefined;
      /** "field: reason", never empty. */
      problems: readonly string[];
    });

/** Past this many schema issues the message says how many more there are. */
const MAX_SCHEMA_PROBLEMS = 10;

export function checkSpec(raw: KubernetesObject): SpecVerdict {
  const ref: ModelRef = { metadata: { ...raw.metadata, name: raw.metadata?.name ?? "" } };
  const status = inferenceModelStatusSchema
    .optional()
    .safeParse((raw as { status?: unknown }).status).data;
  const parsed = inferenceModelSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues;
    const problems = issues
      .slice(0, MAX_SCHEMA_PROBLEMS)
      .map((issue) => `${issue.path.map(String).join(".") || "(object)"}: ${issue.message}`);
    if (issues.length > MAX_SCHEMA_PROBLEMS) {
      problems.push(`and ${issues.length - MAX_SCHEMA_PROBLEMS} more schema problems`);
    }
    return { valid: false, ref, status, model: undefined, problems };
  }
  const model = parsed.data;
  const problems = specProblems(model.spec);
  return problems.length === 0
    ? { valid: true, ref, status, model, problems: [] }
    : { valid: false, ref, status, model, problems };
}

/** The checks a schema cannot make, on a spec that passed it. */
export function specProblems(spec: InferenceModelSpec): string[] {
  return [...sourceProblems(spec.source), ...requestsAboveLimits(spec.resources)];
}

/**
 * The init container's own grammar (crds/source-uri.ts): the operator
 * accepts exactly the URIs `modelgate runtime fetch` does, so a bad URI is
 * reported here rather than by a pod in a crash loop.
 */
function sourceProblems(source: InferenceModelSpec["source"]): string[] {
  const parsed = parseSourceUri(source.uri);
  if (!parsed.ok) {
    const hint = /^pvc:\/\//i.test(source.uri)
      ? "; pvc:// sources are not supported yet: copy the model to s3://, https:// or hf://"
      : "";
    return [`spec.source.uri: ${parsed.message}${hint}`];
  }
  if (source.revision !== undefined && parsed.uri.scheme !== "hf") {
    return [`spec.source.revision applies to hf:// sources only, not ${parsed.uri.scheme}://`];
  }
  return [];
}

type Resources = NonNullable<InferenceModelSpec["resources"]>;

/**
 * A request above its limit: the API server rejects the Deployment, and
 * retrying such an apply can never succeed, so it is an invalid spec.
 */
export function requestsAboveLimits(resources: Resources | undefined): string[] {
  const problems: string[] = [];
  for (const name of RESOURCE_NAMES) {
    const request = resources?.requests?.[name];
    const limit = resources?.limits?.[name];
    if (request === undefined || limit === undefined) continue;
    const r = parseQuantity(request);
    const l = parseQuantity(limit);
    if (r !== undefined && l !== undefined && r > l) {
      problems.push(
        `spec.resources.requests.${name} (${request}) exceeds spec.resources.limits.${name} (${limit})`,
      );
    }
  }
  return problems;
}

const SUFFIX: Record<string, number> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
};

/**
 * The value of a quantity in the schema's subset (a decimal and one of the
 * suffixes above), or undefined for anything else. Floating point is exact
 * enough to order two quantities a user wrote by hand.
 */
export function parseQuantity(quantity: string): number | undefined {
  const match = /^([0-9]+(?:\.[0-9]+)?)(m|k|Ki|Mi|Gi|Ti|M|G|T)?$/.exec(quantity);
  if (!match?.[1]) return undefined;
  const factor = SUFFIX[match[2] ?? ""];
  return factor === undefined ? undefined : Number(match[1]) * factor;
}
