import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Deployment,
} from "@kubernetes/client-node";
import { parse, stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey, type GeneratedKey } from "../../gateway/auth/key-format.js";
import { formatPaySignature, signPayload } from "../../gateway/pay/signature.js";
import { CHART_DIR } from "../chart/chart-support.js";
import { waitForCondition } from "../operator/cluster/support.js";
import { fixtureFolder } from "../runtime/support/runtime-server.js";
import {
  createTestNamespace,
  eventually,
  REPO_ROOT,
  testCluster,
  type TestCluster,
} from "../support/cluster.js";
import { startNodeAgent, type NodeAgent } from "../support/node-agent.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";
import {
  serviceAccountKubeconfig,
  startFromDeployment,
  type ChartProcess,
} from "./support/chart-process.js";
import { blocksUnder } from "./support/readme.js";

/**
 * The chart as a user installs it, with everything after `helm install` real:
 * the release's operator and gateway run as processes with the arguments,
 * environment and Secrets the chart rendered, each authenticated as the
 * chart's own ServiceAccount (so its RBAC is what they get); the chart's
 * example models are applied with kubectl, their pods run on a node agent,
 * and requests through the gateway get answers on both routes, including the
 * README's own curl lines run as written.
 */
const run = promisify(execFile);
const RELEASE = "modelgate";
const KID = "kid-e2e";
const PROVIDER_CREDENTIAL = "provider-credential-for-chart-e2e";
const TEXT_MODEL = "smollm2-135m-instruct";
const NLI_MODEL = "all-minilm-l6-v2";

let cluster: TestCluster;
let kc: KubeConfig;
let releaseNs: string;
let modelNs: string;
const namespaces: Array<() => Promise<void>> = [];
let dir: string;
let key: GeneratedKey;
let signingSecret: string;
let provider: { url: string; child: ChildProcess } | undefined;
let agent: NodeAgent | undefined;
let operator: ChartProcess | undefined;
let gateway: ChartProcess | undefined;
/** The second gateway replica: the chart runs two, sharing PostgreSQL and Valkey. */
let gateway2: ChartProcess | undefined;
let postgres: PostgresServer | undefined;
let valkey: RedisServer | undefined;
/** Everything started, kept as promises so that afterAll stops what did start when beforeAll fails half-way. */
const starting: Array<Promise<{ stop(): Promise<void> }>> = [];
let installed = false;
let operatorDeployment: V1Deployment;

const kubectl = async (args: string[], input?: string): Promise<string> => {
  const child = run(join(cluster.binDir, "kubectl"), [
    "--kubeconfig",
    cluster.kubeconfigPath,
    ...args,
  ]);
  if (input !== undefined) child.child.stdin!.end(input);
  return (await child).stdout;
};
const helm = async (args: string[]): Promise<string> =>
  (await run(join(cluster.binDir, "helm"), ["--kubeconfig", cluster.kubeconfigPath, ...args]))
    .stdout;

/** The payment provider stand-in as its own process, as `modelgate dev` runs it. */
async function startProvider(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    join(REPO_ROOT, "node_modules", ".bin", "tsx"),
    [
      join(REPO_ROOT, "test", "fixtures", "payment-provider", "main.ts"),
      "--credential",
      PROVIDER_CREDENTIAL,
      "--allowance",
      "1000000",
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const url = String((await lines.next()).value);
  if (!url.startsWith("http://127.0.0.1:")) throw new Error(`provider printed ${url}`);
  return { url, child };
}

/**
 * The chart's example models with only what cannot work here replaced:
 * - spec.source: huggingface.co is out of reach, so each example serves a
 *   generated test model of its task from a file:// folder (the examples'
 *   `revision` pins an hf:// source and goes with it);
 * - spec.scheduling: onto the node agent's node, the only one running pods;
 * - smollm2 `maxTokens: 2048` → 512, tiny-gpt's context (n_positions);
 * - all-minilm `runtime.zeroShotMethod: similarity` → `nli`: tiny-nli is an
 *   NLI cross-encoder (entailment logits), not a sentence-embedding model.
 * Names, model ids, routes, pricing, resources, autoscaling and the other
 * runtime tuning are the examples' own.
 */
async function exampleModels(): Promise<string> {
  const fixtures: Record<string, string> = {
    [TEXT_MODEL]: await fixtureFolder("tiny-gpt"),
    [NLI_MODEL]: await fixtureFolder("tiny-nli"),
  };
  const examples = (await readdir(join(CHART_DIR, "examples"))).filter((f) => f.endsWith(".yaml"));
  const docs = await Promise.all(
    examples.map(async (file) => {
      const model = parse(await readFile(join(CHART_DIR, "examples", file), "utf8")) as {
        metadata: { name: string };
        spec: Record<string, unknown> & { runtime?: Record<string, unknown> };
      };
      const folder = fixtures[model.metadata.name];
      if (!folder) throw new Error(`no test model stands in for example ${file}`);
      model.spec.source = { uri: `file://${folder}` };
      model.spec.scheduling = agent!.schedulingFor();
      if (model.metadata.name === TEXT_MODEL) model.spec.maxTokens = 512;
      if (model.spec.runtime?.zeroShotMethod === "similarity") {
        model.spec.runtime.zeroShotMethod = "nli";
      }
      return stringify(model);
    }),
  );
  expect(docs).toHaveLength(2);
  return docs.join("---\n");
}

beforeAll(async () => {
  cluster = await testCluster();
  kc = cluster.kc;
  dir = await mkdtemp(join(tmpdir(), "chart-e2e-"));
  const release = await createTestNamespace(kc, "chart-e2e");
  const models = await createTestNamespace(kc, "chart-e2e-models");
  namespaces.push(release.remove, models.remove);
  releaseNs = release.namespace;
  modelNs = models.namespace;

  key = generateApiKey();
  signingSecret = randomBytes(24).toString("hex");
  const startingAgent = startNodeAgent({
    kubeconfigPath: cluster.kubeconfigPath,
    nodeName: "chart-e2e-0",
  });
  starting.push(startingAgent);
  provider = await startProvider();
  // The stores a production install points the chart at (CloudNativePG's
  // app Secret holds the URL under `uri`; a Valkey chart's under `url`),
  // here real servers on loopback, named by Secrets in the release namespace.
  [postgres, valkey] = await Promise.all([startPostgresServer(), startRedisServer()]);
  const core = kc.makeApiClient(CoreV1Api);
  const databaseUrl = await postgres.createDatabase();
  await Promise.all([
    core.createNamespacedSecret({
      namespace: releaseNs,
      body: { metadata: { name: "e2e-postgres-app" }, stringData: { uri: databaseUrl } },
    }),
    core.createNamespacedSecret({
      namespace: releaseNs,
      body: { metadata: { name: "e2e-valkey" }, stringData: { url: valkey.url } },
    }),
  ]);

  // What a user puts in their values: a keys entry from `modelgate keys
  // create` (hash only) with its account and project, the payment route with
  // the provider's URL, credential and signing secret by kid, one watched
  // namespace, and two gateway replicas on the shared stores.
  const values = {
    watchNamespace: modelNs,
    gateway: {
      replicaCount: 2,
      database: { existingSecret: "e2e-postgres-app" },
      valkey: { existingSecret: "e2e-valkey" },
      apiKeys: {
        accounts: [{ id: "acme", projects: ["web", "batch"] }],
        keys: [{ id: key.id, hash: key.hash, account: "acme", projects: ["web"] }],
      },
      pay: {
        enabled: true,
        providerUrl: provider.url,
        providerCredential: PROVIDER_CREDENTIAL,
        signingSecrets: { [KID]: signingSecret },
      },
    },
  };
  await writeFile(join(dir, "values.yaml"), stringify(values));
  // No --wait: the chart's own pods are Pending or kwok fakes; their
  // processes are started below instead.
  const notes = await helm([
    "install",
    RELEASE,
    CHART_DIR,
    "--namespace",
    releaseNs,
    "--values",
    join(dir, "values.yaml"),
  ]);
  installed = true;
  expect(notes).toContain("STATUS: deployed");

  const apps = kc.makeApiClient(AppsV1Api);
  const read = (name: string) => apps.readNamespacedDeployment({ name, namespace: releaseNs });
  const [operatorDeploy, gatewayDeploy] = await Promise.all([
    read(`${RELEASE}-operator`),
    read(`${RELEASE}-gateway`),
  ]);
  operatorDeployment = operatorDeploy;
  const start = (deployment: V1Deployment, podName: string): Promise<ChartProcess> => {
    const started = serviceAccountKubeconfig(
      cluster,
      releaseNs,
      deployment.spec!.template.spec!.serviceAccountName!,
      dir,
    ).then((kubeconfigPath) =>
      startFromDeployment({ kc, deployment, podName, dir: join(dir, podName), kubeconfigPath }),
    );
    starting.push(started);
    return started;
  };
  [operator, gateway, gateway2, agent] = await Promise.all([
    start(operatorDeploy, `${RELEASE}-operator-e2e`),
    start(gatewayDeploy, `${RELEASE}-gateway-e2e`),
    start(gatewayDeploy, `${RELEASE}-gateway-e2e-2`),
    startingAgent,
  ]);

  // As the README says: kubectl apply the examples (edited as above).
  const applied = await kubectl(["apply", "-n", modelNs, "-f", "-"], await exampleModels());
  expect(applied).toContain(`inferencemodel.serving.modelgate.dev/${TEXT_MODEL} created`);
}, 150_000);

afterAll(async () => {
  const core = kc?.makeApiClient(CoreV1Api);
  // The models' pods go first, while the agent still runs to stop their
  // processes; their Deployments first, so nothing makes new ones.
  if (core && modelNs) {
    await kc
      .makeApiClient(AppsV1Api)
      .deleteCollectionNamespacedDeployment({ namespace: modelNs })
      .catch(() => undefined);
    await core.deleteCollectionNamespacedPod({ namespace: modelNs }).catch(() => undefined);
    await eventually(
      async () => {
        const left = await core.listNamespacedPod({ namespace: modelNs });
        if (left.items.length > 0) throw new Error(`${left.items.length} pods left`);
      },
      45_000,
      250,
    ).catch(() => undefined);
  }
  const [startedAgent, ...processes] = await Promise.all(
    starting.map((p) => p.catch(() => undefined)),
  );
  await startedAgent?.stop();
  await Promise.all([
    ...processes.map((p) => p?.stop()),
    (async () => {
      if (provider && provider.child.exitCode === null) {
        const exited = new Promise((resolve) => provider!.child.once("exit", resolve));
        provider.child.kill("SIGTERM");
        await exited;
      }
    })(),
  ]);
  await Promise.all([postgres?.stop(), valkey?.stop()]);
  if (installed) await helm(["uninstall", RELEASE, "--namespace", releaseNs]).catch(() => {});
  await Promise.all(namespaces.map((remove) => remove()));
  if (dir) await rm(dir, { recursive: true, force: true });
}, 120_000);

const post = (path: string, body: string, headers: Record<string, string>) =>
  fetch(`${gateway!.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });

const paySignature = (body: string, secret = signingSecret) =>
  formatPaySignature({
    t: Math.floor(Date.now() / 1000),
    kid: KID,
    v1: [signPayload(Buffer.from(body), secret)],
  });

describe("the chart installed, its operator and gateway run as processes", () => {
  it("runs each process with the chart's arguments and as its ServiceAccount", async () => {
    // The rendered arguments, kept but for the listen address and the mounts.
    expect(operator!.args).toContain(`--watch-namespace=${modelNs}`);
    expect(operator!.args).toContain("--runtime-image=ghcr.io/modelgate/modelgate:0.1.0");
    expect(operator!.args).toContain(`--lease-namespace=${releaseNs}`);
    expect(gateway!.args).toContain("--registry=kubernetes");
    expect(gateway!.args).toContain(`--pay-provider-url=${provider!.url}`);
    expect(gateway!.args.find((a) => a.startsWith("--keys-file="))).toContain(dir);
    expect(operatorDeployment.spec?.template.spec?.serviceAccountName).toBe(`${RELEASE}-operator`);

    // The leader Lease, in the release namespace, taken under the chart's Role.
    const lease = await eventually(async () => {
      const l = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({
        name: `${RELEASE}-operator`,
        namespace: releaseNs,
      });
      // The identity is the pod name and the process id.
      if (!l.spec?.holderIdentity?.startsWith(`${RELEASE}-operator-e2e_`))
        throw new Error("not held yet");
      return l;
    });
    expect(lease.metadata?.namespace).toBe(releaseNs);

    // The ServiceAccount token really is the chart's: it may read models in
    // the watched namespace and nothing of the release's Secrets.
    const asOperator = ["--kubeconfig", join(dir, `${RELEASE}-operator.kubeconfig`)];
    const can = async (...args: string[]) =>
      (
        await run(join(cluster.binDir, "kubectl"), [...asOperator, "auth", "can-i", ...args]).catch(
          (err: { stdout: string }) => ({ stdout: err.stdout }),
        )
      ).stdout.trim();
    expect(await can("create", "deployments.apps", "-n", modelNs)).toBe("yes");
    expect(await can("get", "secrets", "-n", releaseNs)).toBe("no");
    expect(await can("create", "deployments.apps", "-n", releaseNs)).toBe("no");

    // The README's CRD upgrade, as a server-side dry run: the cluster is
    // shared, and a second field manager would keep fields a later CRD drops.
    const crd = await kubectl([
      "apply",
      "--server-side",
      "--dry-run=server",
      "-f",
      join(CHART_DIR, "crds"),
    ]);
    expect(crd).toContain("inferencemodels.serving.modelgate.dev serverside-applied");
  });

  it("reconciles both example models to Ready with the chart's RBAC", async () => {
    await Promise.all(
      [TEXT_MODEL, NLI_MODEL].map((name) =>
        waitForCondition(kc, modelNs, name, "Ready", "True", undefined, 120_000),
      ),
    );
    // The README's way to watch them.
    const table = await kubectl(["get", "inferencemodels", "-n", modelNs]);
    expect(table).toMatch(new RegExp(`${TEXT_MODEL}\\s`));
    expect(table).toMatch(new RegExp(`${NLI_MODEL}\\s`));
  }, 130_000);

  it("answers /v1/responses with an API key: text generation and classification", async () => {
    const text = await eventually(
      async () => {
        const r = await post(
          "/v1/responses",
          JSON.stringify({
            model: TEXT_MODEL,
            input: "Hello",
            max_output_tokens: 8,
            temperature: 0,
          }),
          { "x-api-key": key.key },
        );
        if (r.status !== 200) throw new Error(`${r.status}: ${await r.text()}`);
        return (await r.json()) as {
          status: string;
          model: string;
          output: Array<{ content: Array<{ type: string; text: string }> }>;
          usage: { output_tokens: number };
        };
      },
      10_000,
      100,
    );
    expect(["completed", "incomplete"]).toContain(text.status);
    expect(text.model).toBe(TEXT_MODEL);
    expect(text.output[0]!.content[0]!.type).toBe("output_text");
    expect(typeof text.output[0]!.content[0]!.text).toBe("string");
    expect(text.usage.output_tokens).toBeGreaterThan(0);

    const scores = await post(
      "/v1/responses",
      JSON.stringify({
        model: NLI_MODEL,
        input: "the striker scored a goal",
        categories: ["sports", "politics"],
      }),
      { "x-api-key": key.key, "x-project-id": "web" },
    );
    expect(scores.status).toBe(200);
    const labels = (await scores.json()) as Record<string, number>;
    expect(Object.keys(labels).sort()).toEqual(["politics", "sports"]);
    expect(labels.sports).toBeGreaterThan(labels.politics!);
  });

  it("answers /pay/v1/responses with a valid pay-signature, with pay-usage", async () => {
    const body = JSON.stringify({
      model: TEXT_MODEL,
      input: "Hello",
      max_output_tokens: 8,
      temperature: 0,
    });
    const r = await post("/pay/v1/responses", body, {
      "pay-signature": paySignature(body),
      "pay-agent-id": "agent-e2e",
    });
    expect(r.status, await r.clone().text()).toBe(200);
    expect(r.headers.get("pay-usage")).toMatch(
      /^slug="smollm2", input_tokens=\d+, output_tokens=\d+$/,
    );
    expect(((await r.json()) as { object: string }).object).toBe("response");
  });

  it("refuses a request without a key and one with a bad signature", async () => {
    const body = JSON.stringify({ model: NLI_MODEL, input: "a goal", categories: ["sports"] });
    const noKey = await post("/v1/responses", body, {});
    expect(noKey.status).toBe(401);
    expect(((await noKey.json()) as { error: { code: string } }).error.code).toBe(
      "invalid_api_key",
    );
    const forged = await post("/pay/v1/responses", body, {
      "pay-signature": paySignature(body, "not-the-signing-secret"),
    });
    expect(forged.status).toBe(401);
    expect(await forged.text()).toBe('{"error":"invalid_pay_signature"}');
  });

  it("answers the README's curl lines as written", async () => {
    await writeFile(join(dir, "pay-secret"), `${signingSecret}\n`, { mode: 0o600 });
    const blocks = blocksUnder("Call both routes");
    const env = {
      ...process.env,
      GATEWAY: gateway!.url,
      KEY: key.key,
      PAY_KID: KID,
      PAY_SECRET_FILE: join(dir, "pay-secret"),
    };
    const outputs: string[] = [];
    for (const block of blocks) {
      const { stdout } = await run("bash", ["-euo", "pipefail", "-c", block.text], {
        cwd: REPO_ROOT,
        env,
      });
      outputs.push(stdout);
    }
    expect(outputs).toHaveLength(3);
    const [text, classify, pay] = outputs as [string, string, string];
    expect(JSON.parse(text)).toMatchObject({ object: "response", model: TEXT_MODEL });
    expect(Object.keys(JSON.parse(classify) as object).sort()).toEqual(["cooking", "sports"]);
    expect(pay).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(pay).toMatch(/\npay-usage: slug="smollm2", input_tokens=\d+, output_tokens=\d+/);
  }, 30_000);

  it("runs two gateway replicas on the shared PostgreSQL: each one's usage is read from the other", async () => {
    // The URL came from the Secret as the variable, never as a flag.
    for (const replica of [gateway!, gateway2!]) {
      expect(replica.args.some((a) => a.startsWith("--database-url"))).toBe(false);
      expect(replica.args).toContain("--replicas=2");
    }
    const start = Math.floor(Date.now() / 1000) - 3600;
    const read = async (replica: ChartProcess) => {
      const r = await fetch(
        `${replica.url}/v1/organization/usage/completions?start_time=${start}&group_by=model`,
        { headers: { "x-api-key": key.key } },
      );
      expect(r.status, await r.clone().text()).toBe(200);
      return (await r.json()) as { totals: { num_model_requests: number; input_tokens: number } };
    };
    const before = await read(gateway!);
    for (const replica of [gateway!, gateway2!]) {
      const r = await fetch(`${replica.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key.key },
        body: JSON.stringify({ model: NLI_MODEL, input: "a goal", categories: ["sports"] }),
      });
      expect(r.status).toBe(200);
    }
    // Both rows reach the one ledger (from each replica's journal, within
    // about 100 ms); either replica reads both.
    const after = await eventually(
      async () => {
        const page = await read(gateway2!);
        if (page.totals.num_model_requests < before.totals.num_model_requests + 2)
          throw new Error("not in the ledger yet");
        return page;
      },
      10_000,
      100,
    );
    expect(after.totals.num_model_requests).toBe(before.totals.num_model_requests + 2);
    expect((await read(gateway!)).totals).toEqual(after.totals);
  });
});
