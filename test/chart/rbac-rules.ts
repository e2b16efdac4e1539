/**
 * The exact RBAC the chart grants, as ruleLines() writes it: the contract of
 * the operator's and the gateway's access, shared by the render test and the
 * SubjectAccessReview test against the cluster.
 */
const WRITE = "create,delete,get,list,patch,update,watch";

export const OPERATOR_RULES = [
  `apps/deployments: ${WRITE}`,
  `autoscaling/horizontalpodautoscalers: ${WRITE}`,
  "core/events: create,patch",
  "core/pods: get,list,watch",
  `core/services: ${WRITE}`,
  "discovery.k8s.io/endpointslices: get,list,watch",
  "events.k8s.io/events: create,patch",
  `policy/poddisruptionbudgets: ${WRITE}`,
  "serving.modelgate.dev/inferencemodels: get,list,patch,update,watch",
  "serving.modelgate.dev/inferencemodels/status: get,patch,update",
].sort();

export const leaseRules = (leaseName: string): string[] =>
  [
    "coordination.k8s.io/leases: create",
    `coordination.k8s.io/leases[${leaseName}]: get,update`,
  ].sort();

export const GATEWAY_RULES = [
  "discovery.k8s.io/endpointslices: get,list,watch",
  "serving.modelgate.dev/inferencemodels: get,list,watch",
].sort();

/** A check for a SubjectAccessReview: group "" is the core group. */
export interface Access {
  group: string;
  resource: string;
  verb: string;
  subresource?: string;
  name?: string;
}

/** Every (resource, verb) the operator's rules allow, one access each. */
export function operatorAllowed(): Access[] {
  const out: Access[] = [];
  for (const line of OPERATOR_RULES) {
    const [target, verbs] = line.split(": ") as [string, string];
    const slash = target.indexOf("/");
    const group = target.slice(0, slash);
    const [resource, subresource] = target.slice(slash + 1).split("/") as [string, string?];
    for (const verb of verbs.split(",")) {
      out.push({ group: group === "core" ? "" : group, resource, subresource, verb });
    }
  }
  return out;
}

/** Things the operator must not be able to do anywhere. */
export const OPERATOR_DENIED: Access[] = [
  { group: "", resource: "secrets", verb: "get" },
  { group: "", resource: "secrets", verb: "list" },
  { group: "", resource: "configmaps", verb: "get" },
  { group: "", resource: "pods", verb: "delete" },
  { group: "", resource: "pods", verb: "create" },
  { group: "", resource: "pods", subresource: "exec", verb: "create" },
  { group: "apps", resource: "deployments", verb: "deletecollection" },
  { group: "apps", resource: "statefulsets", verb: "create" },
  { group: "serving.modelgate.dev", resource: "inferencemodels", verb: "create" },
  { group: "serving.modelgate.dev", resource: "inferencemodels", verb: "delete" },
  { group: "rbac.authorization.k8s.io", resource: "roles", verb: "create" },
  { group: "", resource: "nodes", verb: "list" },
  { group: "", resource: "namespaces", verb: "delete" },
  { group: "coordination.k8s.io", resource: "leases", verb: "delete" },
];

export const GATEWAY_DENIED: Access[] = [
  { group: "", resource: "secrets", verb: "get" },
  { group: "", resource: "pods", verb: "list" },
  { group: "", resource: "services", verb: "create" },
  { group: "serving.modelgate.dev", resource: "inferencemodels", verb: "patch" },
  {
    group: "serving.modelgate.dev",
    resource: "inferencemodels",
    subresource: "status",
    verb: "update",
  },
  { group: "discovery.k8s.io", resource: "endpointslices", verb: "create" },
  { group: "apps", resource: "deployments", verb: "get" },
  { group: "coordination.k8s.io", resource: "leases", verb: "get" },
];
