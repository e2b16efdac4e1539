import { readFileSync } from "node:fs";
import { join } from "node:path";
import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1HorizontalPodAutoscaler,
  V1Ingress,
  V1PersistentVolumeClaim,
  V1PodDisruptionBudget,
  V1Role,
  V1RoleBinding,
  V1Secret,
} from "@kubernetes/client-node";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { KeysFileSchema } from "../../gateway/auth/keys-file.js";
import { signingSecretsSchema } from "../../gateway/config.js";
import { REPO_ROOT } from "../support/cluster.js";
import { CI_VALUES, container, one, render, ruleLines } from "./chart-support.js";
import { GATEWAY_RULES, OPERATOR_RULES } from "./rbac-rules.js";

/**
 * The chart-testing value sets of charts/modelgate/ci/, rendered and checked:
 * each optional part appears when switched on, and changes only what it should.
 */
const gatewayOf = (objects: KubernetesObject[]) =>
  one<V1Deployment>(objects, "Deployment", "gateway");
const argsOf = (deployment: V1Deployment) => container(deployment).args ?? [];
const decode = (secret: V1Secret, key: string) =>
  Buffer.from(secret.data![key]!, "base64").toString("utf8");

describe("chart value sets", () => {
  it("watchNamespace: Roles in that namespace instead of ClusterRoles, and both components told", async () => {
    const objects = await render({ files: [CI_VALUES("watch-namespace")] });
    expect(objects.filter((o) => o.kind?.startsWith("Cluster"))).toEqual([]);
    const manager = one<V1Role>(objects, "Role", "operator-manager");
    expect(manager.metadata?.namespace).toBe("models");
    expect(ruleLines(manager.rules)).toEqual(OPERATOR_RULES);
    const gatewayRole = one<V1Role>(objects, "Role", "gateway");
    expect(gatewayRole.metadata?.namespace).toBe("models");
    expect(ruleLines(gatewayRole.rules)).toEqual(GATEWAY_RULES);
    const binding = one<V1RoleBinding>(objects, "RoleBinding", "operator-manager");
    expect(binding.metadata?.namespace).toBe("models");
    expect(binding.roleRef.kind).toBe("Role");
    expect(binding.subjects?.[0]?.namespace).toBe("modelgate-system");

    const operator = one<V1Deployment>(objects, "Deployment", "operator");
    expect(argsOf(operator)).toEqual([
      "operator",
      "--watch-namespace=models",
      "--runtime-image=registry.example.test/modelgate-runtime:0.1.0-cpu",
      "--runtime-image-pull-policy=Always",
      "--no-leader-elect",
      "--port=8081",
      "--workers=4",
      "--log-level=info",
    ]);
    // Without an election two operators must never overlap, and no Lease role is needed.
    expect(operator.spec?.strategy?.type).toBe("Recreate");
    expect(objects.some((o) => o.metadata?.name?.includes("leader-election"))).toBe(false);
    expect(argsOf(gatewayOf(objects))).toContain("--watch-namespace=models");
  });

  it("ingress: routes the hosts to the gateway Service", async () => {
    const objects = await render({ files: [CI_VALUES("ingress")] });
    const ingress = one<V1Ingress>(objects, "Ingress", "gateway");
    expect(ingress.spec?.ingressClassName).toBe("nginx");
    expect(ingress.spec?.tls).toEqual([
      { secretName: "modelgate-tls", hosts: ["api.modelgate.test"] },
    ]);
    expect(ingress.spec?.rules).toEqual([
      {
        host: "api.modelgate.test",
        http: {
          paths: [
            {
              path: "/",
              pathType: "Prefix",
              backend: { service: { name: "mg-modelgate-gateway", port: { name: "http" } } },
            },
          ],
        },
      },
    ]);
  });

  it("httpRoute: attaches to the given Gateway with the path prefixes", async () => {
    const objects = await render({ files: [CI_VALUES("httproute")] });
    const route = one<KubernetesObject & { spec: Record<string, unknown> }>(
      objects,
      "HTTPRoute",
      "gateway",
    );
    expect(route.apiVersion).toBe("gateway.networking.k8s.io/v1");
    expect(route.spec).toEqual({
      parentRefs: [{ name: "public", namespace: "gateway-system", sectionName: "https" }],
      hostnames: ["api.modelgate.test"],
      rules: [
        {
          matches: [
            { path: { type: "PathPrefix", value: "/v1" } },
            { path: { type: "PathPrefix", value: "/pay/v1" } },
          ],
          backendRefs: [{ name: "mg-modelgate-gateway", port: 80 }],
        },
      ],
    });
  });

  it("autoscaling: an HPA owns the replicas, and spread and PDB select the gateway's pods", async () => {
    const objects = await render({ files: [CI_VALUES("autoscaling")] });
    const hpa = one<V1HorizontalPodAutoscaler & { spec: { metrics: unknown[] } }>(
      objects,
      "HorizontalPodAutoscaler",
      "gateway",
    );
    expect(hpa.spec.scaleTargetRef).toEqual({
      apiVersion: "apps/v1",
      kind: "Deployment",
      name: "mg-modelgate-gateway",
    });
    expect([hpa.spec.minReplicas, hpa.spec.maxReplicas]).toEqual([3, 12]);
    expect(hpa.spec.metrics).toEqual([
      {
        type: "Resource",
        resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 60 } },
      },
      {
        type: "Resource",
        resource: { name: "memory", target: { type: "Utilization", averageUtilization: 80 } },
      },
    ]);
    const gateway = gatewayOf(objects);
    expect(gateway.spec?.replicas).toBeUndefined();
    const selector = gateway.spec?.selector.matchLabels;
    expect(gateway.spec?.template.spec?.topologySpreadConstraints?.[0]?.labelSelector).toEqual({
      matchLabels: selector,
    });
    const pdb = one<V1PodDisruptionBudget>(objects, "PodDisruptionBudget", "gateway");
    expect(pdb.spec).toEqual({ minAvailable: "50%", selector: { matchLabels: selector } });
    // Limits shared through Valkey; while it is away, split by the autoscaler's minimum.
    expect(argsOf(gateway)).toEqual(
      expect.arrayContaining([
        "--replicas=3",
        "--valkey-password-file=/etc/modelgate/valkey/password",
      ]),
    );
    expect(argsOf(gateway).some((a) => a.startsWith("--valkey-ca-file"))).toBe(false);
    // The ledger in PostgreSQL, its URL (with the password) from CloudNativePG's app Secret.
    expect(argsOf(gateway).some((a) => a.startsWith("--database"))).toBe(false);
    expect(container(gateway).env).toEqual([
      { name: "NODE_OPTIONS", value: "--max-old-space-size=384" },
      {
        name: "MODELGATE_DATABASE_URL",
        valueFrom: { secretKeyRef: { name: "acme-pg-app", key: "uri" } },
      },
      {
        name: "MODELGATE_VALKEY_URL",
        valueFrom: { secretKeyRef: { name: "acme-valkey", key: "url" } },
      },
    ]);
    expect(container(gateway).volumeMounts).toContainEqual({
      name: "valkey",
      mountPath: "/etc/modelgate/valkey",
      readOnly: true,
    });
  });

  it("existing secrets: no Secret is created, and each is mounted or referenced by its name and key", async () => {
    const objects = await render({ files: [CI_VALUES("existing-secrets")] });
    expect(objects.filter((o) => o.kind === "Secret")).toEqual([]);
    const gateway = gatewayOf(objects);
    expect(argsOf(gateway)).toEqual(
      expect.arrayContaining([
        "--keys-file=/etc/modelgate/keys/keys.json",
        "--pay-provider-credential-file=/etc/modelgate/pay/credential",
        "--pay-signing-secrets-file=/etc/modelgate/pay/secrets.yaml",
        "--pay-tolerance-seconds=120",
        "--usage-sink-url=https://usage.acme.test/v1/records",
        "--usage-sink-token-file=/etc/modelgate/usage-sink/bearer",
        "--replicas=4",
        "--valkey-password-file=/etc/modelgate/valkey/valkey-password",
        "--valkey-ca-file=/etc/modelgate/valkey/ca.pem",
        "--database-ssl-mode=verify-full",
        "--database-ca-file=/etc/modelgate/database-ca/ca.crt",
      ]),
    );
    expect(argsOf(gateway).some((a) => a.startsWith("--pay-provider-url"))).toBe(false);
    expect(argsOf(gateway).some((a) => a.startsWith("--database-url"))).toBe(false);
    expect(container(gateway).env).toEqual([
      { name: "NODE_OPTIONS", value: "--max-old-space-size=384" },
      {
        name: "MODELGATE_DATABASE_URL",
        valueFrom: { secretKeyRef: { name: "acme-pg-app", key: "uri" } },
      },
      {
        name: "MODELGATE_VALKEY_URL",
        valueFrom: { secretKeyRef: { name: "acme-valkey", key: "valkey-url" } },
      },
      {
        name: "MODELGATE_PAY_PROVIDER_URL",
        valueFrom: { secretKeyRef: { name: "acme-modelgate-pay", key: "url" } },
      },
    ]);
    const secretNames = gateway.spec?.template.spec?.volumes
      ?.filter((v) => v.secret)
      .map((v) => [v.name, v.secret?.secretName]);
    expect(secretNames).toEqual([
      ["keys", "acme-modelgate-keys"],
      ["pay", "acme-modelgate-pay"],
      ["usage-sink", "acme-usage-sink"],
      ["valkey", "acme-valkey"],
      ["database-ca", "acme-pg-ca"],
    ]);
    // Secrets the chart does not render cannot be hashed: no checksum annotation.
    expect(gateway.spec?.template.metadata?.annotations).toBeUndefined();
  });

  it("created secrets: files the gateway's own parsers accept, mounted where the flags point", async () => {
    const objects = await render({ files: [CI_VALUES("created-secrets")] });
    const keys = one<V1Secret>(objects, "Secret", "gateway-keys");
    const keysFile = KeysFileSchema.parse(parse(keys.stringData!["keys.yaml"]!));
    expect(keysFile.keys.map((k) => k.id)).toEqual(["key_ci", "key_old"]);
    expect(keysFile.accounts[0]?.projects).toEqual(["web", "batch"]);
    expect(keysFile.accounts[0]?.projectRateLimits?.web?.tokensPerMinute).toBe(200_000);
    expect(keysFile.keys[0]?.rateLimit?.tokensPerMinute).toBe(50_000);

    const pay = one<V1Secret>(objects, "Secret", "gateway-pay");
    const secrets = signingSecretsSchema.parse(parse(decode(pay, "signing-secrets.yaml")));
    expect(Object.keys(secrets).sort()).toEqual(["kid-2026-11", "kid-legacy"]);
    expect(decode(pay, "provider-credential")).toBe("provider-token-for-tests");
    const sink = one<V1Secret>(objects, "Secret", "gateway-usage-sink");
    expect(decode(sink, "token")).toBe("usage-token-for-tests");

    const gateway = gatewayOf(objects);
    expect(argsOf(gateway)).toEqual(
      expect.arrayContaining([
        "--pay-provider-url=https://pay.example.test",
        "--pay-provider-credential-file=/etc/modelgate/pay/provider-credential",
        "--pay-signing-secrets-file=/etc/modelgate/pay/signing-secrets.yaml",
        "--usage-sink-token-file=/etc/modelgate/usage-sink/token",
        "--rate-limit-tokens-per-minute=100000",
      ]),
    );
    const mounts = container(gateway).volumeMounts?.map((m) => m.mountPath);
    expect(mounts).toEqual(
      expect.arrayContaining([
        "/etc/modelgate/keys",
        "/etc/modelgate/pay",
        "/etc/modelgate/usage-sink",
      ]),
    );
    // Payment settings are read at start: a change to them rolls the pods.
    const annotations = gateway.spec?.template.metadata?.annotations ?? {};
    expect(Object.keys(annotations).sort()).toEqual(["checksum/pay", "checksum/usage-sink"]);
  });

  it("persistence: a kept PVC, one replica, the Recreate strategy, journals synced always", async () => {
    const objects = await render({ files: [CI_VALUES("persistence")] });
    const pvc = one<V1PersistentVolumeClaim>(objects, "PersistentVolumeClaim", "gateway-state");
    expect(pvc.metadata?.annotations?.["helm.sh/resource-policy"]).toBe("keep");
    expect(pvc.spec?.storageClassName).toBe("standard");
    expect(pvc.spec?.resources?.requests?.storage).toBe("5Gi");
    const gateway = gatewayOf(objects);
    expect(gateway.spec?.replicas).toBe(1);
    expect(gateway.spec?.strategy).toEqual({ type: "Recreate" });
    expect(gateway.spec?.template.spec?.containers[0]?.args).toContain("--journal-sync=always");
    expect(gateway.spec?.template.spec?.volumes).toContainEqual({
      name: "state",
      persistentVolumeClaim: { claimName: "mg-modelgate-gateway-state" },
    });
  });

  it("monitoring: ServiceMonitors for gateway, operator and runtimes, and a dashboard of real metrics", async () => {
    const objects = await render({ files: [CI_VALUES("monitoring")] });
    type Monitor = KubernetesObject & {
      spec: {
        selector: { matchLabels: Record<string, string> };
        endpoints: Array<Record<string, string>>;
        namespaceSelector?: unknown;
      };
    };
    for (const [suffix, component] of [
      ["gateway", "gateway"],
      ["operator", "operator"],
      ["runtime", "runtime"],
    ] as const) {
      const monitor = one<Monitor>(objects, "ServiceMonitor", suffix);
      expect(monitor.metadata?.labels?.release).toBe("kube-prometheus-stack");
      expect(monitor.spec.selector.matchLabels["app.kubernetes.io/component"]).toBe(component);
      expect(monitor.spec.endpoints).toEqual([
        {
          // The gateway's metrics are on their own port, behind their own Service.
          port: component === "gateway" ? "metrics" : "http",
          path: "/metrics",
          interval: "15s",
          scrapeTimeout: "10s",
        },
      ]);
    }
    const gatewayMonitor = one<Monitor>(objects, "ServiceMonitor", "gateway");
    expect(gatewayMonitor.spec.selector.matchLabels["modelgate.dev/port"]).toBe("metrics");
    // The operator labels its runtime Services app.kubernetes.io/name=modelgate-runtime.
    const runtime = one<Monitor>(objects, "ServiceMonitor", "runtime");
    expect(runtime.spec.selector.matchLabels["app.kubernetes.io/name"]).toBe("modelgate-runtime");
    expect(runtime.spec.namespaceSelector).toEqual({ any: true });

    const dashboard = one<V1ConfigMap>(objects, "ConfigMap", "dashboard");
    expect(dashboard.metadata?.labels?.grafana_dashboard).toBe("1");
    expect(dashboard.metadata?.annotations).toEqual({ grafana_folder: "Modelgate" });
    const json = dashboard.data!["modelgate.json"]!;
    expect(() => JSON.parse(json) as unknown).not.toThrow();
    const used = new Set(json.match(/modelgate_[a-z_]+/g));
    expect(used.size).toBeGreaterThan(15);
    const known = exportedMetricNames();
    for (const name of used) {
      const base = name.replace(/_(bucket|sum|count)$/, "");
      expect(known, `dashboard metric ${name}`).toContain(base);
    }
  });
});

/** Metric names the components register (source), plus the operator's from its contract. */
function exportedMetricNames(): string[] {
  const files = [
    "gateway/metrics.ts",
    "gateway/metering/meter-metrics.ts",
    "gateway/outbox/outbox-metrics.ts",
    "runtime/metrics.ts",
  ];
  const names = files.flatMap((file) => {
    const text = readFileSync(join(REPO_ROOT, file), "utf8");
    return [...text.matchAll(/"(modelgate_[a-z_]+)"/g)].map((m) => m[1]!);
  });
  return [
    ...names,
    "modelgate_operator_reconcile_total",
    "modelgate_operator_reconcile_errors_total",
    "modelgate_operator_reconcile_duration_seconds",
    "modelgate_operator_queue_depth",
  ];
}
