import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

/**
 * `modelgate dev` as a newcomer runs it, in a child process on a free port,
 * for the tests that drive the whole platform from outside.
 */
export interface DevRun {
  /** Everything it printed so far, stdout and stderr. */
  lines: string[];
  /** The gateway's base URL, from its banner. */
  address: string;
  /** The demo API key, from its banner. */
  apiKey: string;
  /** Sends Ctrl-C and resolves with the exit code. */
  stop(): Promise<number | null>;
  kill(): void;
}

export async function startDev(
  stateDir: string,
  options: { env?: NodeJS.ProcessEnv; args?: string[] } = {},
): Promise<DevRun> {
  const dev = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "cli/modelgate.ts",
      "dev",
      "--port",
      "0",
      "--state-dir",
      stateDir,
      ...(options.args ?? []),
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } },
  );
  const lines: string[] = [];
  createInterface({ input: dev.stdout }).on("line", (line) => lines.push(line));
  createInterface({ input: dev.stderr }).on("line", (line) => lines.push(line));
  const exited = new Promise<number | null>((resolve) => dev.once("exit", (code) => resolve(code)));
  const kill = () => {
    if (dev.exitCode === null) dev.kill("SIGKILL");
  };
  const deadline = Date.now() + 90_000;
  while (!lines.some((l) => l.startsWith("Press Ctrl-C"))) {
    if (dev.exitCode !== null) throw new Error(`modelgate dev exited early:\n${lines.join("\n")}`);
    if (Date.now() > deadline) {
      kill();
      throw new Error(`modelgate dev did not start in 90 s:\n${lines.join("\n")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const text = lines.join("\n");
  return {
    lines,
    address: /gateway (http:\/\/\S+?),/.exec(text)![1]!,
    apiKey: lines.find((l) => /^\s+mg_live_/.test(l))!.trim(),
    stop: () => {
      dev.kill("SIGINT");
      return exited;
    },
    kill,
  };
}
