import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  ApiextensionsV1Api,
  AppsV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
} from "@kubernetes/client-node";
import { parseAllDocuments, stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestNamespace, testCluster, type TestCluster } from "../support/cluster.js";
import { CHART_DIR, CI_VALUES, helmPath, kubectlPath, renderText } from "./chart-support.js";
import {
  GATEWAY_DENIED,
  GATEWAY_RULES,
  OPERATOR_DENIED,
  operatorAllowed,
  type Access,
} from "./rbac-rules.js";

/**
 * The chart against the real API server of test/cluster/: every value set
 * passes a server-side dry run (schema, defaulting, admission), then a real
 * `helm install` (no --wait: kwok's pods are fake) whose RBAC is checked with
 * SubjectAccessReviews for the two service accounts, and `helm uninstall`.
 */
const run = promisify(execFile);
let cluster: TestCluster;
const namespaces: Array<{ namespace: string; remove: () => Promise<void> }> = [];
const releases: Array<{ name: string; namespace: string }> = [];

async function namespace(prefix: string): Promise<string> {
  const ns = await createTestNamespace(cluster.kc, prefix);
  namespaces.push(ns);
  return ns.namespace;
}

async function kubectl(args: string[], input?: string): Promise<string> {
  const child = run(kubectlPath(), ["--kubeconfig", cluster.kubeconfigPath, ...args], {
    maxBuffer: 16 << 20,
  });
  if (input !== undefined) child.child.stdin!.end(input);
  return (await child).stdout;
}

async function helm(args: string[]): Promise<string> {
  const { stdout } = await run(helmPath(), ["--kubeconfig", cluster.kubeconfigPath, ...args]);
  return stdout;
}

/** Kinds whose CRDs the test cluster does not have (Prometheus Operator, Gateway API). */
const FOREIGN_KINDS = new Set(["ServiceMonitor", "HTTPRoute"]);

function withoutForeignKinds(text: string): string {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as { kind?: string } | null)
    .filter((o) => o !== null && !FOREIGN_KINDS.has(o.kind ?? ""))
    .map((o) => stringify(o))
    .join("---\n");
}

beforeAll(async () => {
  cluster = await testCluster();
});

afterAll(async () => {
  for (const r of releases) {
    await helm(["uninstall", r.name, "--namespace", r.namespace]).catch(() => undefined);
  }
  await Promise.all(namespaces.map((ns) => ns.remove()));
});

describe("server-side dry run", () => {
  const sets = [
    "(defaults)",
    ...readdirSync(join(CHART_DIR, "ci")).filter((f) => f.endsWith(".yaml")),
  ];

  it.each(sets)("the API server accepts every object of %s", async (file) => {
    const ns = await namespace("chart-dry");
    const text = await renderText({
      namespace: ns,
      files: file === "(defaults)" ? [] : [join(CHART_DIR, "ci", file)],
      // The watched namespace must exist for its Roles.
      set: file.startsWith("watch-namespace") ? { watchNamespace: ns } : {},
    });
    const out = await kubectl(
      [
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=chart-test",
        "-n",
        ns,
        "-f",
        "-",
      ],
      withoutForeignKinds(text),
    );
    expect(out).toContain(
      "deployment.apps/mg-modelgate-gateway serverside-applied (server dry run)",
    );
    expect(out).toContain(
      "deployment.apps/mg-modelgate-operator serverside-applied (server dry run)",
    );
  });

  it("the API server accepts the examples with strict field validation", async () => {
    const ns = await namespace("chart-ex");
    const out = await kubectl([
      "apply",
      "--server-side",
      "--dry-run=server",
      "--validate=strict",
      "-n",
      ns,
      "-f",
      join(CHART_DIR, "examples"),
    ]);
    expect(out).toContain(
      "inferencemodel.serving.modelgate.dev/smollm2-135m-instruct serverside-applied",
    );
    expect(out).toContain(
      "inferencemodel.serving.modelgate.dev/all-minilm-l6-v2 serverside-applied",
    );
  });
});

describe("helm install", () => {
  it("installs a release cluster-wide whose RBAC allows the operator's and gateway's work and nothing more", async () => {
    const ns = await namespace("chart-inst");
    const other = await namespace("chart-other");
    const release = `mg-${randomBytes(3).toString("hex")}`;
    releases.push({ name: release, namespace: ns });
    const notes = await helm([
      "install",
      release,
      CHART_DIR,
      "--namespace",
      ns,
      "--values",
      CI_VALUES("created-secrets"),
    ]);
    expect(notes).toContain("STATUS: deployed");
    expect(notes).toContain(
      `kubectl -n ${ns} port-forward svc/${release}-modelgate-gateway 8080:80`,
    );

    await expectInstalled(cluster.kc, release, ns);
    const operator = serviceAccount(ns, `${release}-modelgate-operator`);
    const gateway = serviceAccount(ns, `${release}-modelgate-gateway`);
    const lease = `${release}-modelgate-operator`;

    // Cluster-wide: models in any namespace.
    await expectAccess(cluster.kc, operator, other, operatorAllowed(), true);
    await expectAccess(cluster.kc, operator, other, OPERATOR_DENIED, false);
    await expectAccess(cluster.kc, gateway, other, gatewayAllowed(), true);
    await expectAccess(cluster.kc, gateway, other, GATEWAY_DENIED, false);
    // The Lease: its own, in the release namespace only.
    const leases = { group: "coordination.k8s.io", resource: "leases" };
    await expectAccess(
      cluster.kc,
      operator,
      ns,
      [
        { ...leases, verb: "create" },
        { ...leases, verb: "get", name: lease },
        { ...leases, verb: "update", name: lease },
      ],
      true,
    );
    await expectAccess(
      cluster.kc,
      operator,
      ns,
      [
        { ...leases, verb: "get", name: "kube-controller-manager" },
        { ...leases, verb: "update", name: "someone-elses-lease" },
        { ...leases, verb: "list" },
      ],
      false,
    );
    await expectAccess(cluster.kc, operator, other, [{ ...leases, verb: "create" }], false);

    await helm(["uninstall", release, "--namespace", ns]);
    releases.pop();
    const rbac = cluster.kc.makeApiClient(RbacAuthorizationV1Api);
    const left = await rbac.listClusterRole({
      labelSelector: `app.kubernetes.io/instance=${release}`,
    });
    expect(left.items).toEqual([]);
  });

  it("installs a release for one namespace whose roles reach no other", async () => {
    const ns = await namespace("chart-nsi");
    const watched = await namespace("chart-watched");
    const other = await namespace("chart-nsother");
    const release = `mg-${randomBytes(3).toString("hex")}`;
    releases.push({ name: release, namespace: ns });
    await helm([
      "install",
      release,
      CHART_DIR,
      "--namespace",
      ns,
      "--set",
      `watchNamespace=${watched}`,
    ]);
    const operator = serviceAccount(ns, `${release}-modelgate-operator`);
    const gateway = serviceAccount(ns, `${release}-modelgate-gateway`);
    await expectAccess(cluster.kc, operator, watched, operatorAllowed(), true);
    await expectAccess(cluster.kc, gateway, watched, gatewayAllowed(), true);
    await expectAccess(cluster.kc, operator, other, operatorAllowed(), false);
    await expectAccess(cluster.kc, gateway, other, gatewayAllowed(), false);
    await helm(["uninstall", release, "--namespace", ns]);
    releases.pop();
  });
});

interface Subject {
  user: string;
  groups: string[];
}

function serviceAccount(ns: string, name: string): Subject {
  return {
    user: `system:serviceaccount:${ns}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${ns}`, "system:authenticated"],
  };
}

function gatewayAllowed(): Access[] {
  return GATEWAY_RULES.flatMap((line) => {
    const [target, verbs] = line.split(": ") as [string, string];
    const [group, resource] = target.split("/") as [string, string];
    return verbs.split(",").map((verb) => ({ group, resource, verb }));
  });
}

async function expectAccess(
  kc: KubeConfig,
  subject: Subject,
  namespace: string,
  accesses: Access[],
  allowed: boolean,
): Promise<void> {
  const api = kc.makeApiClient(AuthorizationV1Api);
  const answers = await Promise.all(
    accesses.map(async (access) => {
      const review = await api.createSubjectAccessReview({
        body: {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          spec: { ...subject, resourceAttributes: { namespace, ...access } },
        },
      });
      const name = access.name ? `/${access.name}` : "";
      const sub = access.subresource ? `/${access.subresource}` : "";
      return `${access.verb} ${access.group || "core"}/${access.resource}${sub}${name}: ${review.status?.allowed === true}`;
    }),
  );
  expect(answers).toEqual(answers.map((a) => a.replace(/: (true|false)$/, `: ${allowed}`)));
}

async function expectInstalled(kc: KubeConfig, release: string, ns: string): Promise<void> {
  const crd = await kc
    .makeApiClient(ApiextensionsV1Api)
    .readCustomResourceDefinition({ name: "inferencemodels.serving.modelgate.dev" });
  expect(crd.status?.conditions?.find((c) => c.type === "Established")?.status).toBe("True");
  const installed = readFileSync(join(CHART_DIR, "crds", "inference-model.crd.yaml"), "utf8");
  expect(installed).toContain(`name: ${crd.metadata?.name}`);

  const prefix = `${release}-modelgate`;
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  for (const component of ["operator", "gateway"]) {
    const deployment = await apps.readNamespacedDeployment({
      name: `${prefix}-${component}`,
      namespace: ns,
    });
    expect(deployment.metadata?.labels?.["app.kubernetes.io/instance"]).toBe(release);
    await core.readNamespacedService({ name: `${prefix}-${component}`, namespace: ns });
    await core.readNamespacedServiceAccount({ name: `${prefix}-${component}`, namespace: ns });
  }
  await rbac.readClusterRole({ name: `${prefix}-operator-manager` });
  await rbac.readClusterRoleBinding({ name: `${prefix}-operator-manager` });
  await rbac.readClusterRole({ name: `${prefix}-gateway` });
  await rbac.readClusterRoleBinding({ name: `${prefix}-gateway` });
  await rbac.readNamespacedRole({ name: `${prefix}-operator-leader-election`, namespace: ns });
  await rbac.readNamespacedRoleBinding({
    name: `${prefix}-operator-leader-election`,
    namespace: ns,
  });
  const secret = await core.readNamespacedSecret({ name: `${prefix}-gateway-keys`, namespace: ns });
  expect(Object.keys(secret.data ?? {})).toEqual(["keys.yaml"]);
}
