import { createHash } from "node:crypto";

/**
 * How others find what the operator makes for an InferenceModel, part of the
 * InferenceModel contract: the operator names the children with these, and
 * the gateway finds a model's Service (and so its EndpointSlices) and the
 * runtime's port in them by the same functions, without importing the
 * operator.
 *
 * Names are derived from the model's name alone so that every reconcile finds
 * the same objects again (and the apply layer can delete exactly the children
 * it owns).
 *
 * Every name stays a DNS-1123 label of at most 63 characters: the Service
 * name must be one, and the others end up in label values and pod host
 * names, which have the same limit. A name that would be longer keeps a
 * readable prefix and gets a hash of the full name, so two long names that
 * share a prefix never collide and the same model always maps to the same
 * child.
 */
export const MAX_NAME_LENGTH = 63;

/**
 * The runtime container's HTTP port and its name. The Service targets the
 * name and the gateway picks the EndpointSlice port by it, so the number can
 * move without touching either.
 */
export const HTTP_PORT = 8080;
export const HTTP_PORT_NAME = "http";
const HASH_LENGTH = 8;

export interface ChildNames {
  /** `<name>`: the address the gateway uses, `http://<name>.<namespace>.svc:8080`. */
  service: string;
  /** `<name>-runtime`. */
  deployment: string;
  /** Same as the Deployment it scales, as `kubectl autoscale` names it. */
  hpa: string;
  /** Same as the Deployment whose pods it protects. */
  pdb: string;
}

export function childNames(modelName: string): ChildNames {
  const runtime = fitName(modelName, "-runtime");
  return {
    service: serviceName(modelName),
    deployment: runtime,
    hpa: runtime,
    pdb: runtime,
  };
}

/**
 * A Service name must be a DNS-1035 label (it starts with a letter), while an
 * InferenceModel name is a DNS-1123 label and may start with a digit
 * (`7b-chat`). Such names get an `im-` prefix rather than a Service the API
 * server would reject.
 */
export function serviceName(modelName: string): string {
  return /^[a-z]/.test(modelName) ? fitName(modelName, "") : fitName(`im-${modelName}`, "");
}

/**
 * `base + suffix` when it fits in 63 characters; otherwise the start of base,
 * a dash, 8 hex digits of sha256(base) and the suffix. The result never ends
 * in a dash, so it is still a DNS-1123 label.
 */
export function fitName(base: string, suffix: string): string {
  const whole = `${base}${suffix}`;
  if (whole.length <= MAX_NAME_LENGTH) return whole;
  const hash = createHash("sha256").update(base).digest("hex").slice(0, HASH_LENGTH);
  const room = MAX_NAME_LENGTH - suffix.length - HASH_LENGTH - 1;
  const prefix = base.slice(0, room).replace(/-+$/, "");
  return `${prefix}-${hash}${suffix}`;
}
