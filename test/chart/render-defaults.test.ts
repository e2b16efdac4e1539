import { readFileSync } from "node:fs";
import { join } from "node:path";
import type {
  KubernetesObject,
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1Deployment,
  V1Role,
  V1RoleBinding,
  V1Secret,
  V1Service,
} from "@kubernetes/client-node";
import { parse } from "yaml";
import { beforeAll, describe, expect, it } from "vitest";
import { KeysFileSchema } from "../../gateway/auth/keys-file.js";
import { CRD_FILE, REPO_ROOT } from "../support/cluster.js";
import { CHART_DIR, container, kinds, one, render, ruleLines } from "./chart-support.js";
import { GATEWAY_RULES, OPERATOR_RULES, leaseRules } from "./rbac-rules.js";

/**
 * The chart with its default values, rendered by `helm template` and checked
 * field by field: what is created, labels, hardening, probes, arguments and
 * RBAC exactly as least-privilege as the operator's and gateway's contracts.
 */
const NS = "modelgate-system";
const chart = parse(readFileSync(join(CHART_DIR, "Chart.yaml"), "utf8")) as {
  version: string;
  appVersion: string;
};
let objects: KubernetesObject[];

beforeAll(async () => {
  objects = await render({ release: "mg", namespace: NS });
});

describe("the chart with default values", () => {
  it("creates the operator and the gateway with their accounts, roles and keys Secret", () => {
    expect(kinds(objects)).toEqual(
      [
        "ClusterRole/mg-modelgate-gateway",
        "ClusterRole/mg-modelgate-operator-manager",
        "ClusterRoleBinding/mg-modelgate-gateway",
        "ClusterRoleBinding/mg-modelgate-operator-manager",
        "Deployment/mg-modelgate-gateway",
        "Deployment/mg-modelgate-operator",
        "PodDisruptionBudget/mg-modelgate-gateway",
        "Role/mg-modelgate-operator-leader-election",
        "RoleBinding/mg-modelgate-operator-leader-election",
        "Secret/mg-modelgate-gateway-keys",
        "Service/mg-modelgate-gateway",
        "Service/mg-modelgate-gateway-metrics",
        "Service/mg-modelgate-operator",
        "ServiceAccount/mg-modelgate-gateway",
        "ServiceAccount/mg-modelgate-operator",
      ].sort(),
    );
    const namespaced = objects.filter((o) => !o.kind?.startsWith("Cluster"));
    for (const o of namespaced) expect(o.metadata?.namespace, kinds([o])[0]).toBe(NS);
  });

  it("ships the generated CRD untemplated, identical to crds/", () => {
    const copy = readFileSync(join(CHART_DIR, "crds", "inference-model.crd.yaml"), "utf8");
    expect(copy).toBe(readFileSync(CRD_FILE, "utf8"));
    expect(objects.some((o) => o.kind === "CustomResourceDefinition")).toBe(false);
  });

  it("uses the package version as appVersion", () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      version: string;
    };
    expect(chart.appVersion).toBe(pkg.version);
  });

  it("labels every object with the recommended labels, and selects by name, instance and component only", () => {
    for (const o of objects) {
      const component = o.metadata?.name?.includes("operator") ? "operator" : "gateway";
      // The gateway's metrics Service carries the label its ServiceMonitor selects it by.
      const extra = o.metadata?.name?.endsWith("-gateway-metrics")
        ? { "modelgate.dev/port": "metrics" }
        : {};
      expect(o.metadata?.labels, kinds([o])[0]).toEqual({
        ...extra,
        "app.kubernetes.io/name": "modelgate",
        "app.kubernetes.io/instance": "mg",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/version": chart.appVersion,
        "app.kubernetes.io/part-of": "modelgate",
        "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": `modelgate-${chart.version}`,
      });
    }
    for (const component of ["operator", "gateway"]) {
      const selector = {
        "app.kubernetes.io/name": "modelgate",
        "app.kubernetes.io/instance": "mg",
        "app.kubernetes.io/component": component,
      };
      const deployment = one<V1Deployment>(objects, "Deployment", component);
      expect(deployment.spec?.selector.matchLabels).toEqual(selector);
      expect(deployment.spec?.template.metadata?.labels).toMatchObject(selector);
      expect(one<V1Service>(objects, "Service", component).spec?.selector).toEqual(selector);
    }
  });

  it.each(["operator", "gateway"])("hardens the %s pod and container", (component) => {
    const deployment = one<V1Deployment>(objects, "Deployment", component);
    const pod = deployment.spec!.template.spec!;
    expect(pod.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(pod.enableServiceLinks).toBe(false);
    expect(pod.automountServiceAccountToken).toBe(true);
    expect(pod.serviceAccountName).toBe(`mg-modelgate-${component}`);
    const c = container(deployment);
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
    });
    expect(c.resources?.requests?.cpu).toBeDefined();
    expect(c.resources?.requests?.memory).toBeDefined();
    expect(c.resources?.limits?.memory).toBeDefined();
    expect(c.image).toBe(`ghcr.io/modelgate/modelgate:${chart.appVersion}`);
    expect(c.command).toEqual(["modelgate"]);
    // A read-only root needs a writable /tmp.
    expect(c.volumeMounts).toContainEqual({ name: "tmp", mountPath: "/tmp" });
  });

  it("runs the operator with the contract's flags, the downward API and probes on 8081", () => {
    const deployment = one<V1Deployment>(objects, "Deployment", "operator");
    const c = container(deployment);
    expect(c.args).toEqual([
      "operator",
      `--runtime-image=ghcr.io/modelgate/modelgate:${chart.appVersion}`,
      "--runtime-image-pull-policy=IfNotPresent",
      "--leader-elect",
      "--lease-name=mg-modelgate-operator",
      `--lease-namespace=${NS}`,
      "--port=8081",
      "--workers=4",
      "--log-level=info",
    ]);
    expect(c.env).toEqual([
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
      { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
    ]);
    expect(c.ports).toEqual([{ name: "http", containerPort: 8081, protocol: "TCP" }]);
    expect(c.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "http" });
    expect(c.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "http" });
    expect(deployment.spec?.replicas).toBe(1);
    const service = one<V1Service>(objects, "Service", "operator");
    expect(service.spec?.ports).toEqual([
      { name: "http", port: 8081, targetPort: "http", protocol: "TCP", appProtocol: "http" },
    ]);
  });

  it("runs the gateway on the kubernetes registry with its keys Secret and an emptyDir state", () => {
    const deployment = one<V1Deployment>(objects, "Deployment", "gateway");
    const c = container(deployment);
    expect(c.args).toEqual([
      "gateway",
      "--registry=kubernetes",
      "--port=8080",
      "--metrics-port=9090",
      "--request-timeout=30",
      "--upload-timeout=900",
      "--keys-file=/etc/modelgate/keys/keys.yaml",
      "--state-dir=/var/lib/modelgate/gateway",
      "--journal-sync=100ms",
      "--rate-limit-per-minute=600",
      "--rate-limit-burst=60",
      "--body-limit-bytes=1048576",
      "--log-level=info",
    ]);
    expect(c.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "metrics" });
    expect(c.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "metrics" });
    expect(c.ports).toEqual([
      { name: "http", containerPort: 8080, protocol: "TCP" },
      { name: "metrics", containerPort: 9090, protocol: "TCP" },
    ]);
    expect(c.lifecycle?.preStop?.sleep?.seconds).toBe(5);
    expect(c.volumeMounts).toEqual([
      { name: "keys", mountPath: "/etc/modelgate/keys", readOnly: true },
      { name: "state", mountPath: "/var/lib/modelgate/gateway" },
      { name: "tmp", mountPath: "/tmp" },
    ]);
    const volumes = deployment.spec?.template.spec?.volumes;
    // The whole Secret, never a subPath: the keys watcher relies on the ..data swap.
    expect(volumes).toContainEqual({
      name: "keys",
      secret: { secretName: "mg-modelgate-gateway-keys", defaultMode: 0o440 },
    });
    expect(volumes).toContainEqual({ name: "state", emptyDir: { sizeLimit: "1Gi" } });
    // One replica: the embedded ledger and in-process limits belong to one process.
    expect(deployment.spec?.replicas).toBe(1);
    // The old space capped: a batch worker's garbage would otherwise grow the heap (docs/batch.md).
    expect(c.env).toEqual([{ name: "NODE_OPTIONS", value: "--max-old-space-size=384" }]);
    expect(deployment.spec?.strategy?.rollingUpdate?.maxUnavailable).toBe(0);

    const secret = one<V1Secret>(objects, "Secret", "gateway-keys");
    const keysFile = KeysFileSchema.parse(parse(secret.stringData!["keys.yaml"]!));
    expect(keysFile).toEqual({ accounts: [], keys: [] });
    const service = one<V1Service>(objects, "Service", "gateway");
    expect(service.spec?.type).toBe("ClusterIP");
    expect(service.spec?.ports?.[0]).toMatchObject({ port: 80, targetPort: "http" });
  });

  it("keeps /metrics, /healthz and /readyz off the API Service: they have a ClusterIP Service of their own", () => {
    const api = one<V1Service>(objects, "Service", "gateway");
    // The API Service (and so the Ingress and HTTPRoute behind it) reaches the API port only.
    expect(api.spec?.ports?.map((p) => p.targetPort)).toEqual(["http"]);
    const metrics = one<V1Service>(objects, "Service", "gateway-metrics");
    expect(metrics.spec?.type).toBe("ClusterIP");
    expect(metrics.spec?.ports).toEqual([
      { name: "metrics", port: 9090, targetPort: "metrics", protocol: "TCP", appProtocol: "http" },
    ]);
    expect(metrics.metadata?.labels?.["modelgate.dev/port"]).toBe("metrics");
    expect(api.metadata?.labels?.["modelgate.dev/port"]).toBeUndefined();
  });

  it("grants the operator exactly its rules, cluster-wide, and its Lease in the release namespace only", () => {
    const manager = one<V1ClusterRole>(objects, "ClusterRole", "operator-manager");
    expect(ruleLines(manager.rules)).toEqual(OPERATOR_RULES);
    const lease = one<V1Role>(objects, "Role", "operator-leader-election");
    expect(lease.metadata?.namespace).toBe(NS);
    expect(ruleLines(lease.rules)).toEqual(leaseRules("mg-modelgate-operator"));

    const binding = one<V1ClusterRoleBinding>(objects, "ClusterRoleBinding", "operator-manager");
    expect(binding.roleRef).toEqual({
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: "mg-modelgate-operator-manager",
    });
    const subject = { kind: "ServiceAccount", name: "mg-modelgate-operator", namespace: NS };
    expect(binding.subjects).toEqual([subject]);
    const leaseBinding = one<V1RoleBinding>(objects, "RoleBinding", "operator-leader-election");
    expect(leaseBinding.roleRef.name).toBe("mg-modelgate-operator-leader-election");
    expect(leaseBinding.subjects).toEqual([subject]);
  });

  it("grants the gateway read access to models and EndpointSlices, nothing else", () => {
    expect(ruleLines(one<V1ClusterRole>(objects, "ClusterRole", "gateway").rules)).toEqual(
      GATEWAY_RULES,
    );
    const binding = one<V1ClusterRoleBinding>(objects, "ClusterRoleBinding", "gateway");
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: "mg-modelgate-gateway", namespace: NS },
    ]);
  });

  it("never grants a wildcard or access to Secrets", () => {
    const roles = objects.filter((o) => o.kind === "Role" || o.kind === "ClusterRole") as V1Role[];
    for (const role of roles) {
      for (const rule of role.rules ?? []) {
        const words = [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs];
        expect(words, role.metadata?.name).not.toContain("*");
        expect(rule.resources, role.metadata?.name).not.toContain("secrets");
      }
    }
  });

  it("keeps the ServiceAccounts' tokens off unless a pod asks for one", () => {
    for (const name of ["operator", "gateway"]) {
      const sa = one<KubernetesObject & { automountServiceAccountToken?: boolean }>(
        objects,
        "ServiceAccount",
        name,
      );
      expect(sa.automountServiceAccountToken).toBe(false);
    }
  });
});
