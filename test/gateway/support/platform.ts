import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { pino, type Logger } from "pino";
import { buildGateway } from "../../../gateway/app.js";
import { gatewayLoggerOptions } from "../../../gateway/logging.js";
import { buildOpsServer } from "../../../gateway/ops-server.js";
import { generateApiKey, type GeneratedKey } from "../../../gateway/auth/key-format.js";
import { createGatewayComponents, type GatewayComponents } from "../../../gateway/components.js";
import { gatewayConfigSchema, type GatewayConfig } from "../../../gateway/config.js";
import { formatPaySignature, signPayload } from "../../../gateway/pay/signature.js";
import { FileSource } from "../../../gateway/registry/file-source.js";
import {
  startPaymentProvider,
  type PaymentProvider,
} from "../../fixtures/payment-provider/server.js";
import {
  fixtureFolder,
  startRuntime,
  type RunningRuntime,
} from "../../runtime/support/runtime-server.js";
import { seedPgliteFolder } from "../../support/pglite-template.js";
import { startCountingSink, type CountingSink } from "../outbox/sink-server.js";
import { sharedModel } from "../../support/shared-models.js";

/**
 * The real PII model (CC BY 4.0, National Design Studio; attribution in its
 * folder's NOTICE) serves entity extraction beside the generated models.
 * Where the shared models are absent (not in CI), the platform runs without it.
 */
export const PII_MODEL = "rampart-pii";
export const piiModelPath = sharedModel(PII_MODEL, "onnx/model_q4.onnx");

/**
 * The whole request path on loopback, with real parts: runtimes serving the
 * generated models, the payment-provider stand-in, a usage sink that dedupes
 * on Idempotency-Key, and a listening gateway built from real components,
 * real files (keys, secrets, InferenceModel YAML) and its own state folder.
 */
export const SECRETS = {
  k1: "k1-secret-0123456789abcdef",
  k2old: "k2-secret-old-0123456789ab",
  k2new: "k2-secret-new-0123456789ab",
} as const;

export interface Platform {
  url: string;
  /** The operations port: /metrics, /healthz, /readyz. */
  opsUrl: string;
  gateway: FastifyInstance;
  components: GatewayComponents;
  runtimes: { gpt: RunningRuntime; nli: RunningRuntime; pii: RunningRuntime | null };
  provider: PaymentProvider;
  sink: CountingSink;
  keys: {
    acme: GeneratedKey;
    acmeWeb: GeneratedKey;
    revoked: GeneratedKey;
    limited: GeneratedKey;
    /** globex's admin key: reads every account's usage. */
    admin: GeneratedKey;
  };
  stateDir: string;
  logLines: string[];
  /** POST /v1/responses with a key (acme's unless given). */
  api(
    body: unknown,
    options?: { key?: string | null; headers?: Record<string, string> },
  ): Promise<Response>;
  /** POST /pay/v1/responses, signed with kid k1 unless a header is given. */
  pay(
    body: unknown,
    options?: { signature?: string | null; headers?: Record<string, string>; t?: number },
  ): Promise<Response>;
  sign(raw: string | Buffer, kid?: string, secret?: string, t?: number): string;
  close(): Promise<void>;
}

export interface PlatformOptions {
  /** Leave the payment route unconfigured. */
  withoutPayments?: boolean;
  config?: Partial<GatewayConfig>;
  /**
   * The generated decoder behind `tiny-gpt` (that fixture unless given):
   * `bench-gpt` is slow enough per token to leave mid-stream.
   */
  gptFixture?: string;
  /** What `tiny-gpt` does with an input over its 256 tokens: refuse (420, the default) or truncate. */
  gptOverflow?: "error" | "truncate";
}

/** A server that accepts connections and never answers: a runtime stuck mid-inference. */
async function startHungRuntime(): Promise<{ url: string; server: Server }> {
  const server = createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A port nothing listens on: connections are refused. */
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

function modelYaml(name: string, spec: string, endpoint: string | null): string {
  const status = endpoint ? `status:\n  endpoint: ${endpoint}\n` : "";
  return `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: ${name}\nspec:\n${spec}${status}---\n`;
}

export async function startPlatform(options: PlatformOptions = {}): Promise<Platform> {
  const dir = await mkdtemp(join(tmpdir(), "platform-"));
  const gpt = await startRuntime({
    path: await fixtureFolder(options.gptFixture ?? "tiny-gpt"),
    modelId: "tiny-gpt",
    maxTokens: 256,
    overflow: options.gptOverflow ?? "error",
  });
  const nli = await startRuntime({ path: await fixtureFolder("tiny-nli"), modelId: "tiny-nli" });
  const pii = piiModelPath ? await startRuntime({ path: piiModelPath, modelId: PII_MODEL }) : null;
  const hung = await startHungRuntime();
  const refused = await closedPort();
  const provider = await startPaymentProvider();
  const sink = await startCountingSink();

  const source = "  source: { uri: file:///models/x }\n";
  await writeFile(
    join(dir, "models.yaml"),
    modelYaml(
      "tiny-gpt",
      `  task: text-generation\n${source}  maxTokens: 256\n  overflow: ${options.gptOverflow ?? "error"}\n  pricing: { serviceSlug: tiny-gpt, currency: EUR, inputPerMillionTokens: '2.5', outputPerMillionTokens: '10' }\n`,
      gpt.url,
    ) +
      modelYaml("tiny-nli", `  task: zero-shot-classification\n${source}`, nli.url) +
      (pii ? modelYaml(PII_MODEL, `  task: entity-extraction\n${source}`, pii.url) : "") +
      modelYaml(
        "api-only",
        `  model: tiny-gpt-api\n  task: text-generation\n${source}  routes: [api-key]\n`,
        gpt.url,
      ) +
      modelYaml(
        "pay-only",
        `  model: tiny-gpt-pay\n  task: text-generation\n${source}  routes: [pay]\n`,
        gpt.url,
      ) +
      modelYaml("no-endpoint", `  task: text-generation\n${source}`, null) +
      modelYaml("refused", `  task: text-generation\n${source}`, refused) +
      modelYaml("hung", `  task: text-generation\n${source}  timeoutSeconds: 1\n`, hung.url),
  );
  const keys = {
    acme: generateApiKey(),
    acmeWeb: generateApiKey(),
    revoked: generateApiKey(),
    limited: generateApiKey(),
    admin: generateApiKey(),
  };
  const entry = (k: GeneratedKey, extra: string) =>
    `  - id: ${k.id}\n    hash: ${k.hash}\n${extra}`;
  await writeFile(
    join(dir, "keys.yaml"),
    "accounts:\n  - id: acme\n    projects: [web, batch]\n  - id: globex\n    projects: [lab]\nkeys:\n" +
      entry(keys.acme, "    account: acme\n") +
      entry(keys.acmeWeb, "    account: acme\n    projects: [web]\n") +
      entry(keys.revoked, "    account: acme\n    revoked: true\n") +
      entry(
        keys.limited,
        "    account: globex\n    rateLimit: { requestsPerMinute: 60, burst: 2 }\n",
      ) +
      entry(keys.admin, "    account: globex\n    role: admin\n"),
  );
  await writeFile(
    join(dir, "secrets.yaml"),
    `k1: ${SECRETS.k1}\nk2: [${SECRETS.k2new}, ${SECRETS.k2old}]\n`,
  );
  await writeFile(join(dir, "provider-credential"), provider.credential);

  const config = gatewayConfigSchema.parse({
    keysFile: join(dir, "keys.yaml"),
    stateDir: join(dir, "state"),
    usageSinkUrl: sink.url,
    // Suites send hundreds of requests with one key as fast as the machine
    // allows; rate limits are tested with the `limited` key's own limit.
    rateLimitPerMinute: 6_000_000,
    rateLimitBurst: 100_000,
    ...(options.withoutPayments
      ? {}
      : {
          payProviderUrl: provider.url,
          payProviderCredentialFile: join(dir, "provider-credential"),
          paySigningSecretsFile: join(dir, "secrets.yaml"),
        }),
    ...options.config,
  });
  // The gateway's own logger options (redaction, secret scrubbing), writing to memory.
  const logLines: string[] = [];
  const logger: Logger = pino(gatewayLoggerOptions("info"), {
    write: (line: string) => void logLines.push(line),
  });
  if (!config.databaseUrl) await seedPgliteFolder(join(config.stateDir, "db"));
  const components = await createGatewayComponents(config, logger);
  // Open the embedded store before the first request: a stored response
  // waits for it, and suites that time requests (rate limits) must not time
  // its opening. A server may be down on purpose: it is not waited for.
  if (!config.databaseUrl) await components.store.db();
  const files = new FileSource({ dir, registry: components.deps.registry, logger });
  await files.start();
  const gateway = buildGateway(components.deps);
  const url = await gateway.listen({ host: "127.0.0.1", port: 0 });
  const ops = buildOpsServer(components.deps);
  const opsUrl = await ops.listen({ host: "127.0.0.1", port: 0 });

  /**
   * The provider signs each request once, and the gateway accepts a
   * signature once: a body signed again within the same second gets the
   * next second as its timestamp (inside the tolerance), as a provider
   * signing it a moment later would. A test that means to replay passes the
   * same header twice.
   */
  const lastSigned = new Map<string, number>();
  const freshTimestamp = (raw: string | Buffer, kid: string): number => {
    const key = `${kid}\n${raw.toString()}`;
    const t = Math.max(Math.floor(Date.now() / 1000), (lastSigned.get(key) ?? 0) + 1);
    lastSigned.set(key, t);
    return t;
  };
  const sign = (raw: string | Buffer, kid = "k1", secret: string = SECRETS.k1, t?: number) =>
    formatPaySignature({
      t: t ?? freshTimestamp(raw, kid),
      kid,
      v1: [signPayload(Buffer.from(raw), secret)],
    });
  const post = (path: string, body: unknown, headers: Record<string, string>) =>
    fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });

  return {
    url,
    opsUrl,
    gateway,
    components,
    runtimes: { gpt, nli, pii },
    provider,
    sink,
    keys,
    stateDir: config.stateDir,
    logLines,
    api(body, opts = {}) {
      const key = opts.key === undefined ? keys.acme.key : opts.key;
      return post("/v1/responses", body, {
        ...(key === null ? {} : { "x-api-key": key }),
        ...opts.headers,
      });
    },
    pay(body, opts = {}) {
      const raw = typeof body === "string" ? body : JSON.stringify(body);
      const signature =
        opts.signature === undefined ? sign(raw, "k1", SECRETS.k1, opts.t) : opts.signature;
      return post("/pay/v1/responses", raw, {
        ...(signature === null ? {} : { "pay-signature": signature }),
        ...opts.headers,
      });
    },
    sign,
    async close() {
      files.stop();
      await gateway.close();
      await ops.close();
      await components.close();
      await gpt.close();
      await nli.close();
      await pii?.close();
      await provider.close();
      await sink.close();
      hung.server.closeAllConnections();
      await new Promise<void>((resolve) => hung.server.close(() => resolve()));
      // Its state folders hold PGlite stores, about 150 MB a platform: left
      // behind, every suite run filled the machine's disk a little more.
      await rm(dir, { recursive: true, force: true });
    },
  };
}
