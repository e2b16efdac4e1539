import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateApiKey } from "../../gateway/auth/key-format.js";
import { freePort } from "./free-port.js";
import { seedPgliteFolder } from "./pglite-template.js";
import { startServiceProcess } from "./service-process.js";

/**
 * `modelgate gateway` as a real child process on loopback, routing from the
 * cluster registry of one namespace, with a keys file holding one key of
 * account `acme`. Extra flags (payment route, sinks) go in `args`.
 */
export interface GatewayProcess {
  url: string;
  /** `/healthz`, `/readyz`, `/metrics`: never on the API port. */
  opsUrl: string;
  apiKey: string;
  logs: string[];
  stop(): Promise<void>;
}

export async function startGatewayProcess(options: {
  kubeconfigPath: string;
  namespace: string;
  args?: string[];
}): Promise<GatewayProcess> {
  const dir = await mkdtemp(join(tmpdir(), "gateway-process-"));
  const key = generateApiKey();
  await writeFile(
    join(dir, "keys.yaml"),
    `accounts:\n  - id: acme\n    projects: [web]\nkeys:\n  - id: ${key.id}\n    hash: ${key.hash}\n    account: acme\n`,
  );
  await seedPgliteFolder(join(dir, "state", "db"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const metricsPort = await freePort();
  const opsUrl = `http://127.0.0.1:${metricsPort}`;
  const service = await startServiceProcess({
    args: [
      "gateway",
      "--registry=kubernetes",
      `--kubeconfig=${options.kubeconfigPath}`,
      `--watch-namespace=${options.namespace}`,
      `--keys-file=${join(dir, "keys.yaml")}`,
      `--state-dir=${join(dir, "state")}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      "--rate-limit-per-minute=100000",
      "--rate-limit-burst=10000",
      ...(options.args ?? []),
    ],
    readyUrl: `${opsUrl}/readyz`,
  });
  return {
    url,
    opsUrl,
    apiKey: key.key,
    logs: service.logs,
    stop: async () => {
      await service.stop();
    },
  };
}
