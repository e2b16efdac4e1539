import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateApiKey, type GeneratedKey } from "../../../gateway/auth/key-format.js";
import { freePort } from "../../support/free-port.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";

/**
 * What the usage exporter's process tests share: a folder with one key and
 * tiny-gpt served by a runtime, and gateway processes started from it, each
 * on a state folder of its own, exporting to one sink.
 */
export interface GatewayFolder {
  dir: string;
  key: GeneratedKey;
}

export async function gatewayFolder(prefix: string, runtimeUrl: string): Promise<GatewayFolder> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const key = generateApiKey();
  await writeFile(
    join(dir, "keys.yaml"),
    `accounts:\n  - id: acme\nkeys:\n  - id: ${key.id}\n    hash: ${key.hash}\n    account: acme\n`,
  );
  await mkdir(join(dir, "models"), { recursive: true });
  await writeFile(
    join(dir, "models", "tiny-gpt.yaml"),
    `apiVersion: serving.modelgate.dev/v1alpha1\nkind: InferenceModel\nmetadata:\n  name: tiny-gpt\nspec:\n  task: text-generation\n  source: { uri: file:///models/x }\nstatus:\n  endpoint: ${runtimeUrl}\n`,
  );
  return { dir, key };
}

export interface ExporterGateway {
  /** Its state folder's name under the folder. */
  name: string;
  url: string;
  opsUrl: string;
  process: ServiceProcess;
}

/** A gateway on `folder`'s state folder `name`; the ledger embedded unless `databaseUrl`. */
export async function startExporterGateway(
  folder: GatewayFolder,
  name: string,
  sinkUrl: string,
  databaseUrl?: string,
): Promise<ExporterGateway> {
  const port = await freePort();
  const metricsPort = await freePort();
  const process = await startServiceProcess({
    args: [
      "gateway",
      `--models-dir=${join(folder.dir, "models")}`,
      `--keys-file=${join(folder.dir, "keys.yaml")}`,
      `--state-dir=${join(folder.dir, name)}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      `--usage-sink-url=${sinkUrl}`,
      "--rate-limit-per-minute=1000000",
      "--rate-limit-burst=100000",
    ],
    ...(databaseUrl ? { env: { MODELGATE_DATABASE_URL: databaseUrl } } : {}),
    readyUrl: `http://127.0.0.1:${metricsPort}/readyz`,
  });
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    opsUrl: `http://127.0.0.1:${metricsPort}`,
    process,
  };
}

/** Waits until `done` holds; throws naming `what` once `ms` pass. */
export async function until(
  what: string,
  done: () => boolean | Promise<boolean>,
  ms = 30_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
