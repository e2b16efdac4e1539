import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateApiKey } from "../../../gateway/auth/key-format.js";
import { DEFAULT_PROVIDER_CREDENTIAL } from "../../fixtures/payment-provider/server.js";
import { seedPgliteFolder } from "../../support/pglite-template.js";

/**
 * The files `modelgate gateway` reads, written to a fresh temp folder: a
 * models folder with one InferenceModel whose status.endpoint is the runtime
 * under test, a keys file with one key, the payment route's signing secret
 * and provider credential, and an empty state folder for the journals. The
 * result is the gateway's flags, as commander would hand them over.
 */
export interface GatewaySetup {
  /** The temp folder; the caller removes it. */
  dir: string;
  flags: Record<string, string>;
  /** The one API key, for `x-api-key`. */
  apiKey: string;
  /** For signing payment-route bodies. */
  kid: string;
  secret: string;
}

export interface GatewayFilesOptions {
  model: string;
  runtimeUrl: string;
  sinkUrl: string | null;
  providerUrl: string | null;
  logLevel: string;
}

/** Out of reach of the benchmark's rates: the limiter runs, and never refuses. */
const NO_LIMIT = { requestsPerMinute: 1_000_000, burst: 1_000_000 };
const KID = "bench";
const SECRET = "bench-signing-secret-0123456789";

export async function writeGatewayFiles(options: GatewayFilesOptions): Promise<GatewaySetup> {
  const dir = await mkdtemp(join(tmpdir(), "modelgate-bench-gateway-"));
  const models = join(dir, "models");
  await mkdir(models);
  await writeFile(
    join(models, `${options.model}.yaml`),
    [
      "apiVersion: serving.modelgate.dev/v1alpha1",
      "kind: InferenceModel",
      "metadata:",
      `  name: ${options.model}`,
      "spec:",
      "  task: zero-shot-classification",
      "  source: { uri: file:///models/x }",
      `  pricing: { serviceSlug: ${options.model} }`,
      "status:",
      `  endpoint: ${options.runtimeUrl}`,
      "",
    ].join("\n"),
  );
  const key = generateApiKey();
  await writeFile(
    join(dir, "keys.yaml"),
    [
      "accounts:",
      "  - id: bench",
      "keys:",
      `  - id: ${key.id}`,
      `    hash: ${key.hash}`,
      "    account: bench",
      `    rateLimit: { requestsPerMinute: ${NO_LIMIT.requestsPerMinute}, burst: ${NO_LIMIT.burst} }`,
      "",
    ].join("\n"),
  );
  await writeFile(join(dir, "secrets.yaml"), `${KID}: ${SECRET}\n`);
  await writeFile(join(dir, "provider-credential"), DEFAULT_PROVIDER_CREDENTIAL);

  await seedPgliteFolder(join(dir, "state", "db"));
  const flags: Record<string, string> = {
    host: "127.0.0.1",
    port: "0",
    modelsDir: models,
    keysFile: join(dir, "keys.yaml"),
    stateDir: join(dir, "state"),
    // Payment agents have no per-key override; the defaults cover them.
    rateLimitPerMinute: String(NO_LIMIT.requestsPerMinute),
    rateLimitBurst: String(NO_LIMIT.burst),
    logLevel: options.logLevel,
  };
  if (options.sinkUrl) flags.usageSinkUrl = options.sinkUrl;
  if (options.providerUrl) {
    flags.payProviderUrl = options.providerUrl;
    flags.payProviderCredentialFile = join(dir, "provider-credential");
    flags.paySigningSecretsFile = join(dir, "secrets.yaml");
  }
  return { dir, flags, apiKey: key.key, kid: KID, secret: SECRET };
}
