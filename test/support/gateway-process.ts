import { spawn } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateApiKey } from "../../gateway/auth/key-format.js";
import { REPO_ROOT } from "./cluster.js";
import { freePort } from "./operator-process.js";

/**
 * `modelgate gateway` as a real child process on loopback, routing from the
 * cluster registry of one namespace, with a keys file holding one key of
 * account `acme`. Extra flags (payment route, sinks) go in `args`.
 */
export interface GatewayProcess {
  url: string;
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
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(REPO_ROOT, "cli", "modelgate.ts"),
      "gateway",
      "--registry=kubernetes",
      `--kubeconfig=${options.kubeconfigPath}`,
      `--watch-namespace=${options.namespace}`,
      `--keys-file=${join(dir, "keys.yaml")}`,
      `--state-dir=${join(dir, "state")}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      "--rate-limit-per-minute=100000",
      "--rate-limit-burst=10000",
      ...(options.args ?? []),
    ],
    { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  const logs: string[] = [];
  const keep = (chunk: Buffer) => logs.push(...chunk.toString("utf8").split("\n").filter(Boolean));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`gateway did not become ready:\n${logs.slice(-30).join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    apiKey: key.key,
    logs,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
