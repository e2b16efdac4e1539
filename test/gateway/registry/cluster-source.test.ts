import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CustomObjectsApi,
  DiscoveryV1Api,
  type KubeConfig,
  type V1Endpoint,
  type V1EndpointSlice,
} from "@kubernetes/client-node";
import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InferenceModel } from "../../../crds/inference-model.js";
import { buildGateway } from "../../../gateway/app.js";
import { buildOpsServer } from "../../../gateway/ops-server.js";
import { generateApiKey, type GeneratedKey } from "../../../gateway/auth/key-format.js";
import { createGatewayComponents, type GatewayComponents } from "../../../gateway/components.js";
import { gatewayConfigSchema, registrySourceOf } from "../../../gateway/config.js";
import { formatPaySignature, signPayload } from "../../../gateway/pay/signature.js";
import { ModelRegistry, type RoutableModel } from "../../../gateway/registry/registry.js";
import { startRegistrySource, type RunningSource } from "../../../gateway/registry/start-source.js";
import { buildService } from "../../../operator/children/service.js";
import {
  startPaymentProvider,
  type PaymentProvider,
} from "../../fixtures/payment-provider/server.js";
import {
  createTestNamespace,
  eventually,
  serverSideApply,
  testCluster,
} from "../../support/cluster.js";
import { startGatedProxy, type GatedProxy } from "./gated-proxy.js";

/**
 * The cluster source against the real test control plane. There is no
 * operator here: the test writes each InferenceModel, its Service and its
 * EndpointSlices itself, with addresses in 10.250.0.0/16. Nothing is ever
 * sent to those addresses: every request below is to a model with no ready
 * endpoint, or is refused before the gateway would forward it.
 */

const SECRET = "cluster-source-secret-0123456789";
/** Model ids are global in an all-namespaces registry: keep ours apart from other suites'. */
const tag = randomBytes(3).toString("hex");
const id = (name: string) => `${name}-${tag}`;

type Conditions = V1Endpoint["conditions"];
const READY: Conditions = { ready: true, serving: true, terminating: false };
const NOT_READY: Conditions = { ready: false, serving: false, terminating: false };
const TERMINATING: Conditions = { ready: false, serving: true, terminating: true };

let kc: KubeConfig;
let kubeconfigPath: string;
let nsA: string;
let nsB: string;
const removers: Array<() => Promise<void>> = [];
let dir: string;
let key: GeneratedKey;
let provider: PaymentProvider;
let components: GatewayComponents;
let source: RunningSource;
let app: FastifyInstance;
let ops: FastifyInstance;
const logLines: string[] = [];

async function applyModel(
  namespace: string,
  name: string,
  spec: Record<string, unknown> = {},
): Promise<void> {
  const applied = await serverSideApply(kc, {
    apiVersion: "serving.modelgate.dev/v1alpha1",
    kind: "InferenceModel",
    metadata: { name, namespace },
    spec: { task: "text-generation", source: { uri: "file:///models/x" }, ...spec },
  });
  // The Service the operator would make, owned by the model (the registry never reads it).
  await serverSideApply(kc, buildService(applied as unknown as InferenceModel));
}

async function applySlice(
  namespace: string,
  service: string,
  name: string,
  endpoints: Array<[address: string, conditions: Conditions]>,
): Promise<void> {
  const slice: V1EndpointSlice = {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name,
      namespace,
      labels: {
        "kubernetes.io/service-name": service,
        "endpointslice.kubernetes.io/managed-by": "modelgate-tests",
      },
    },
    addressType: "IPv4",
    endpoints: endpoints.map(([address, conditions]) => ({ addresses: [address], conditions })),
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
  };
  await serverSideApply(kc, slice);
}

async function deleteSlice(namespace: string, name: string): Promise<void> {
  await kc.makeApiClient(DiscoveryV1Api).deleteNamespacedEndpointSlice({ namespace, name });
}

async function deleteModel(namespace: string, name: string): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({
    group: "serving.modelgate.dev",
    version: "v1alpha1",
    namespace,
    plural: "inferencemodels",
    name,
  });
}

function registry(): ModelRegistry {
  return components.deps.registry;
}

/** Resolves with the time the registry first satisfies `check`, read on its change events. */
function whenRegistry(
  models: ModelRegistry,
  check: (resolve: (id: string) => RoutableModel | undefined) => boolean,
): Promise<number> {
  return new Promise((resolve) => {
    const off = models.onChange(() => {
      if (!check((modelId) => models.resolve(modelId))) return;
      off();
      resolve(performance.now());
    });
  });
}

function api(model: string) {
  return app.inject({
    method: "POST",
    url: "/v1/responses",
    headers: { "content-type": "application/json", "x-api-key": key.key },
    payload: JSON.stringify({ model, input: "Hello" }),
  });
}

function pay(model: string) {
  const raw = JSON.stringify({ model, input: "Hello" });
  const t = Math.floor(Date.now() / 1000);
  return app.inject({
    method: "POST",
    url: "/pay/v1/responses",
    headers: {
      "content-type": "application/json",
      "pay-signature": formatPaySignature({ t, kid: "k1", v1: [signPayload(raw, SECRET)] }),
      "pay-agent-id": "agent-1",
    },
    payload: raw,
  });
}

function errorCode(body: string): unknown {
  return (JSON.parse(body) as { error?: { code?: unknown } }).error?.code;
}

beforeAll(async () => {
  ({ kc, kubeconfigPath } = await testCluster());
  for (const prefix of ["gw-registry", "gw-registry-other"]) {
    const made = await createTestNamespace(kc, prefix);
    removers.push(made.remove);
    if (nsA === undefined) nsA = made.namespace;
    else nsB = made.namespace;
  }
  // A model that exists, ready, before the gateway starts.
  await applyModel(nsA, id("pre"));
  await applySlice(nsA, id("pre"), `${id("pre")}-1`, [["10.250.0.1", READY]]);

  dir = await mkdtemp(join(tmpdir(), "cluster-source-"));
  key = generateApiKey();
  provider = await startPaymentProvider();
  await writeFile(
    join(dir, "keys.yaml"),
    `accounts:\n  - id: acme\nkeys:\n  - id: ${key.id}\n    hash: ${key.hash}\n    account: acme\n`,
  );
  await writeFile(join(dir, "secrets.yaml"), `k1: ${SECRET}\n`);
  await writeFile(join(dir, "credential"), provider.credential);
  const config = gatewayConfigSchema.parse({
    keysFile: join(dir, "keys.yaml"),
    stateDir: join(dir, "state"),
    payProviderUrl: provider.url,
    payProviderCredentialFile: join(dir, "credential"),
    paySigningSecretsFile: join(dir, "secrets.yaml"),
    kubeconfig: kubeconfigPath,
  });
  const logger = pino({ level: "info" }, { write: (line: string) => void logLines.push(line) });
  components = await createGatewayComponents(config, logger);
  const { deps } = components;
  source = await startRegistrySource(registrySourceOf(config), {
    registry: deps.registry,
    logger,
    onRejected: (count) => deps.metrics.registryRejected.set(count),
  });
  app = buildGateway(deps);
  ops = buildOpsServer({ ...deps, ready: () => source.ready() });
  await source.synced;
});

afterAll(async () => {
  await source?.stop();
  await app?.close();
  await ops?.close();
  await components?.close();
  await provider?.close();
  for (const remove of removers) await remove();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the registry's cluster source (all namespaces)", () => {
  it("holds what existed before it started once synced, and reports ready", async () => {
    expect(registry().resolve(id("pre"))).toMatchObject({
      key: `${nsA}/${id("pre")}`,
      endpoints: ["http://10.250.0.1:8080"],
    });
    const ready = await ops.inject({ method: "GET", url: "/readyz" });
    expect(ready.statusCode).toBe(200);
    expect(logLines.join("")).toContain("model registry synced from the cluster");
  });

  // The time it takes is logged, not asserted: a wall-clock bound in a unit
  // test measures the machine's load (2.4 s once in a full CI run on two
  // cores) as much as the watch.
  it("makes a model routable once its slice turns ready (the time is logged)", async () => {
    const alpha = id("alpha");
    await applyModel(nsA, alpha);
    await eventually(() => expect(registry().resolve(alpha)?.endpoints).toEqual([]), 5_000);

    // Known but without a ready endpoint: 503 with Retry-After, nothing forwarded.
    await applySlice(nsA, alpha, `${alpha}-1`, [["10.250.1.1", NOT_READY]]);
    const waiting = await api(alpha);
    expect(waiting.statusCode).toBe(503);
    expect(waiting.headers["retry-after"]).toBe("1");
    expect(errorCode(waiting.body)).toBe("model_unavailable");

    const routable = whenRegistry(registry(), (resolve) => resolve(alpha)?.endpoints.length === 1);
    const started = performance.now();
    await applySlice(nsA, alpha, `${alpha}-1`, [["10.250.1.1", READY]]);
    const written = performance.now();
    const seen = await routable;
    const ms = Math.round(seen - started);
    console.log(
      `time to routable: ${ms} ms from the API write (write took ${Math.round(written - started)} ms)`,
    );
    expect(registry().resolve(alpha)?.endpoints).toEqual(["http://10.250.1.1:8080"]);
  });

  it("drops not-ready and terminating endpoints, and adds a second slice's", async () => {
    const alpha = id("alpha");
    await applySlice(nsA, alpha, `${alpha}-1`, [
      ["10.250.1.1", TERMINATING],
      ["10.250.1.2", READY],
      ["10.250.1.3", NOT_READY],
    ]);
    await eventually(
      () => expect(registry().resolve(alpha)?.endpoints).toEqual(["http://10.250.1.2:8080"]),
      5_000,
    );
    await applySlice(nsA, alpha, `${alpha}-2`, [
      ["10.250.1.4", READY],
      ["10.250.1.2", READY],
    ]);
    await eventually(
      () =>
        expect(registry().resolve(alpha)?.endpoints).toEqual([
          "http://10.250.1.2:8080",
          "http://10.250.1.4:8080",
        ]),
      5_000,
    );
    const metrics = await ops.inject({ method: "GET", url: "/metrics" });
    expect(metrics.body).toContain(`modelgate_gateway_model_ready_endpoints{model="${alpha}"} 2`);
    expect(metrics.body).toMatch(/^modelgate_gateway_routable_models [1-9]\d*$/m);
  });

  it("stops routing to a deleted slice's endpoints, and forgets a deleted model", async () => {
    const alpha = id("alpha");
    await deleteSlice(nsA, `${alpha}-2`);
    await eventually(
      () => expect(registry().resolve(alpha)?.endpoints).toEqual(["http://10.250.1.2:8080"]),
      5_000,
    );
    await deleteSlice(nsA, `${alpha}-1`);
    await eventually(() => expect(registry().resolve(alpha)?.endpoints).toEqual([]), 5_000);
    const gone = await api(alpha);
    expect(gone.statusCode).toBe(503);
    expect(gone.headers["retry-after"]).toBe("1");

    await deleteModel(nsA, alpha);
    await eventually(() => expect(registry().resolve(alpha)).toBeUndefined(), 5_000);
    const unknown = await api(alpha);
    expect(unknown.statusCode).toBe(400);
    expect(errorCode(unknown.body)).toBe("model_not_found");
  });

  it("serves a model whose routes are [pay] on /pay only", async () => {
    const payOnly = id("pay-only");
    await applyModel(nsA, payOnly, { routes: ["pay"] });
    await eventually(() => expect(registry().resolve(payOnly)).toBeDefined(), 5_000);
    expect(registry().resolve(payOnly)?.routes).toEqual(new Set(["pay"]));

    const viaKey = await api(payOnly);
    expect(viaKey.statusCode).toBe(400);
    expect(errorCode(viaKey.body)).toBe("model_not_found");
    // Routed on /pay: past the signature, the body and the allowance, stopped
    // only because no runtime is ready yet.
    const viaPay = await pay(payOnly);
    expect(viaPay.statusCode).toBe(503);
    expect(viaPay.headers["retry-after"]).toBe("1");
    expect(errorCode(viaPay.body)).toBe("model_unavailable");
  });

  it("skips an object the schema rejects, logging it by name and field, and serves the rest", async () => {
    const bad = id("bad");
    const good = id("good");
    // The CRD accepts any int64 for tolerationSeconds; the zod schema stops at 2^53.
    await applyModel(nsA, bad, {
      scheduling: { tolerations: [{ key: "k", operator: "Exists", tolerationSeconds: 2 ** 60 }] },
    });
    await applyModel(nsA, good);
    await eventually(() => expect(registry().resolve(good)).toBeDefined(), 5_000);
    await eventually(
      () =>
        expect(logLines.join("\n")).toContain(
          `skipping InferenceModel ${nsA}/${bad}: spec.scheduling.tolerations.0.tolerationSeconds`,
        ),
      5_000,
    );
    expect(registry().resolve(bad)).toBeUndefined();
    const metrics = await ops.inject({ method: "GET", url: "/metrics" });
    expect(metrics.body).toMatch(/^modelgate_gateway_registry_rejected_models [1-9]\d*$/m);

    // A model that turns invalid stops being routed; fixed, it comes back.
    await applyModel(nsA, good, {
      scheduling: { tolerations: [{ key: "k", operator: "Exists", tolerationSeconds: 2 ** 60 }] },
    });
    await eventually(() => expect(registry().resolve(good)).toBeUndefined(), 5_000);
    await applyModel(nsA, good, { scheduling: { tolerations: [] } });
    await eventually(() => expect(registry().resolve(good)).toBeDefined(), 5_000);
  });
});

describe("--watch-namespace", () => {
  it("sees the models of its namespace only", async () => {
    const models = new ModelRegistry();
    const scoped = await startRegistrySource(
      { kind: "kubernetes", kubeconfig: kubeconfigPath, namespace: nsA },
      { registry: models, logger: pino({ level: "silent" }) },
    );
    try {
      await scoped.synced;
      expect(models.resolve(id("pre"))).toBeDefined();
      const elsewhere = id("elsewhere");
      const marker = id("marker");
      await applyModel(nsB, elsewhere);
      await applySlice(nsB, elsewhere, `${elsewhere}-1`, [["10.250.2.1", READY]]);
      // Written after the other namespace's objects: once it is seen, they would have been.
      await applyModel(nsA, marker);
      await eventually(() => expect(registry().resolve(elsewhere)?.endpoints).toHaveLength(1));
      await eventually(() => expect(models.resolve(marker)).toBeDefined(), 5_000);
      expect(models.resolve(elsewhere)).toBeUndefined();
      expect(models.list().every((m) => m.key.startsWith(`${nsA}/`))).toBe(true);
    } finally {
      await scoped.stop();
    }
  });
});

describe("/readyz", () => {
  let proxy: GatedProxy;
  afterAll(async () => proxy?.close());

  it("answers 503 until both watches have synced, then 200", async () => {
    proxy = await startGatedProxy(new URL(kc.getCurrentCluster()!.server));
    const exported = JSON.parse(kc.exportConfig()) as {
      clusters: Array<{ cluster: { server: string } }>;
    };
    for (const entry of exported.clusters) entry.cluster.server = proxy.url;
    const gatedConfig = join(dir, "gated-kubeconfig");
    await writeFile(gatedConfig, JSON.stringify(exported));

    const models = new ModelRegistry();
    const gated = await startRegistrySource(
      { kind: "kubernetes", kubeconfig: gatedConfig, namespace: nsA },
      { registry: models, logger: pino({ level: "silent" }) },
    );
    const gatedApp = buildOpsServer({
      ...components.deps,
      registry: models,
      ready: () => gated.ready(),
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const before = await gatedApp.inject({ method: "GET", url: "/readyz" });
      expect(before.statusCode).toBe(503);
      expect((await gatedApp.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);

      proxy.open();
      await gated.synced;
      const after = await gatedApp.inject({ method: "GET", url: "/readyz" });
      expect(after.statusCode).toBe(200);
      expect(models.resolve(id("pre"))).toBeDefined();
    } finally {
      await gated.stop();
      await gatedApp.close();
    }
  });
});
