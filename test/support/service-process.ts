import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "./cluster.js";

/**
 * A `modelgate` subcommand as a real child process, run from the sources
 * through tsx (or from dist/, as the image runs it), its output kept for
 * assertions and post-mortems, and started only once its readiness URL
 * answers 2xx.
 */
export interface ServiceProcess {
  child: ChildProcess;
  logs: string[];
  exited: Promise<number | null>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: a crash, nothing released. */
  kill(): Promise<void>;
  /** Whether `kill()` ended it: a crash the test caused, not one to report. */
  readonly killedByTest: boolean;
}

export interface ServiceProcessOptions {
  /** The subcommand and its flags, e.g. ["gateway", "--port=1234"]. */
  args: string[];
  readyUrl: string;
  /** Added to the base environment. */
  env?: NodeJS.ProcessEnv;
  /** The environment the child starts from; default this process's. */
  baseEnv?: NodeJS.ProcessEnv;
  entry?: "tsx" | "dist";
  readyTimeoutMs?: number;
}

export async function startServiceProcess(options: ServiceProcessOptions): Promise<ServiceProcess> {
  const program =
    options.entry === "dist"
      ? [join(REPO_ROOT, "dist", "cli", "modelgate.js")]
      : ["--import", "tsx", join(REPO_ROOT, "cli", "modelgate.ts")];
  const child = spawn(process.execPath, [...program, ...options.args], {
    cwd: REPO_ROOT,
    env: { ...(options.baseEnv ?? process.env), ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: string[] = [];
  const keep = (chunk: Buffer) => logs.push(...chunk.toString("utf8").split("\n").filter(Boolean));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => resolve(code)),
  );

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    const ready = await fetch(options.readyUrl).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(
        `modelgate ${options.args[0]} did not become ready:\n${logs.slice(-30).join("\n")}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  let killedByTest = false;
  return {
    child,
    logs,
    exited,
    get killedByTest() {
      return killedByTest;
    },
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      // A graceful stop that hangs is a failure to see in the logs, not a hung test run.
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
    async kill() {
      if (child.exitCode === null) {
        killedByTest = true;
        child.kill("SIGKILL");
      }
      await exited;
    },
  };
}
