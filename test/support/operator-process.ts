import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { REPO_ROOT } from "./cluster.js";

/**
 * `modelgate operator` as a real child process (through tsx, so no build is
 * needed), watching one test namespace so tests sharing the cluster never
 * see each other's models. Its log lines are kept for assertions and shown
 * when a test fails to start it.
 */
export interface OperatorProcess {
  port: number;
  identity: string;
  child: ChildProcess;
  logs: string[];
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: a crash, nothing released. */
  kill(): Promise<void>;
  exited: Promise<number | null>;
}

export interface OperatorProcessOptions {
  kubeconfigPath: string;
  namespace: string;
  identity: string;
  /** Extra flags, e.g. shorter lease timings. */
  args?: string[];
  image?: string;
  /** "tsx" runs the sources (no build needed); "dist" runs the built output, as the image does. */
  entry?: "tsx" | "dist";
  logLevel?: string;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.once("error", reject);
  });
}

export async function startOperatorProcess(
  options: OperatorProcessOptions,
): Promise<OperatorProcess> {
  const port = await freePort();
  const program =
    options.entry === "dist"
      ? [join(REPO_ROOT, "dist", "cli", "modelgate.js")]
      : ["--import", "tsx", join(REPO_ROOT, "cli", "modelgate.ts")];
  const child = spawn(
    process.execPath,
    [
      ...program,
      "operator",
      `--kubeconfig=${options.kubeconfigPath}`,
      `--watch-namespace=${options.namespace}`,
      `--lease-namespace=${options.namespace}`,
      `--runtime-image=${options.image ?? "modelgate:test"}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--log-level=${options.logLevel ?? "debug"}`,
      ...(options.args ?? []),
    ],
    {
      cwd: REPO_ROOT,
      env: { ...process.env, POD_NAME: options.identity, MODELGATE_IDENTITY: options.identity },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const logs: string[] = [];
  const keep = (chunk: Buffer) => logs.push(...chunk.toString("utf8").split("\n").filter(Boolean));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => resolve(code)),
  );

  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`operator did not become ready:\n${logs.slice(-30).join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    identity: options.identity,
    child,
    logs,
    exited,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      return exited;
    },
    async kill() {
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
