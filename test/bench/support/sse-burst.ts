import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { buildCProgram } from "./c-programs.js";

/**
 * sse-burst.c, driven from here: `burst` sends one request on n keep-alive
 * connections at once and resolves with each stream's milliseconds from its
 * write to the first read holding a delta. The C process does the sending and
 * the reading, so the clients of a burst cost the core they share with what
 * they measure a few hundredths of a millisecond a stream rather than a Node
 * client's half millisecond.
 */
export interface SseBurst {
  pid: number;
  burst(
    origin: string,
    headers: Record<string, string>,
    body: string,
    n: number,
  ): Promise<number[]>;
  stop(): Promise<void>;
}

export async function startSseBurst(): Promise<SseBurst> {
  const child = spawn(await buildCProgram("sse-burst"), [], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const reap = () => child.kill("SIGKILL");
  process.once("exit", reap);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => process.off("exit", reap));
  const waiting: { resolve: (line: string) => void; reject: (error: Error) => void }[] = [];
  createInterface({ input: child.stdout }).on("line", (line) => waiting.shift()?.resolve(line));
  void exited.then(() => {
    for (const w of waiting.splice(0)) w.reject(new Error("sse-burst exited"));
  });

  return {
    pid: child.pid!,
    async burst(origin, headers, body, n) {
      const url = new URL(origin);
      const head = [
        "POST /v1/responses HTTP/1.1",
        `host: ${url.host}`,
        "content-type: application/json",
        `content-length: ${Buffer.byteLength(body)}`,
        ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
      ];
      const request = Buffer.from(`${head.join("\r\n")}\r\n\r\n${body}`);
      const line = await new Promise<string>((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${url.port} ${n} ${request.length}\n`);
        child.stdin.write(request);
      });
      if (!line.startsWith("ok ")) throw new Error(`${origin}: sse-burst: ${line}`);
      return line.slice(3).split(" ").map(Number);
    },
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}
