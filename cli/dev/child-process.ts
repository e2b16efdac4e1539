import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

/**
 * Children of `modelgate dev`, started with the same Node and loader flags as
 * the parent (so a `tsx` checkout and a built `dist/` both work), their output
 * prefixed with a name, and stopped together.
 */
export interface Child {
  name: string;
  process: ChildProcess;
  /** Resolves with the first stdout line that matches. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<string>;
  stop(): Promise<void>;
}

export function startChild(
  name: string,
  script: string,
  args: string[],
  log: (line: string) => void,
): Child {
  const child = spawn(process.execPath, [...process.execArgv, script, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" },
  });
  const lines: string[] = [];
  const waiters: Array<(line: string) => void> = [];
  const forward = (stream: NodeJS.ReadableStream) =>
    createInterface({ input: stream }).on("line", (line) => {
      lines.push(line);
      for (const waiter of waiters) waiter(line);
      log(`[${name}] ${line}`);
    });
  forward(child.stdout);
  forward(child.stderr);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  return {
    name,
    process: child,
    waitForLine(pattern, timeoutMs) {
      const seen = lines.find((line) => pattern.test(line));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${name}: no line matching ${pattern} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        child.once("exit", (code) => {
          clearTimeout(timer);
          reject(new Error(`${name} exited with code ${code} before it was ready`));
        });
        waiters.push((line) => {
          if (pattern.test(line)) {
            clearTimeout(timer);
            resolve(line);
          }
        });
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** Polls a URL until it answers 200. */
export async function waitUntilReady(url: string, timeoutMs: number, child: Child): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.process.exitCode !== null)
      throw new Error(`${child.name} exited with code ${child.process.exitCode}`);
    const ok = await fetch(url).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${child.name} was not ready at ${url} within ${timeoutMs} ms`);
}
