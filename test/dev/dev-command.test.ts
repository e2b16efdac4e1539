import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { generateFixtures } from "../fixtures/generate.js";

const exec = promisify(execFile);

interface DevRun {
  lines: string[];
  /** Sends Ctrl-C and resolves with the exit code. */
  stop(): Promise<number | null>;
  kill(): void;
}

/** Starts `modelgate dev` on a free port and waits for its "Press Ctrl-C" line. */
async function startDev(stateDir: string): Promise<DevRun> {
  const dev = spawn(
    process.execPath,
    ["--import", "tsx", "cli/modelgate.ts", "dev", "--port", "0", "--state-dir", stateDir],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const lines: string[] = [];
  createInterface({ input: dev.stdout }).on("line", (line) => lines.push(line));
  createInterface({ input: dev.stderr }).on("line", (line) => lines.push(line));
  const exited = new Promise<number | null>((resolve) => dev.once("exit", (code) => resolve(code)));
  const run: DevRun = {
    lines,
    stop: () => {
      dev.kill("SIGINT");
      return exited;
    },
    kill: () => {
      if (dev.exitCode === null) dev.kill("SIGKILL");
    },
  };
  const deadline = Date.now() + 90_000;
  while (!lines.some((l) => l.startsWith("Press Ctrl-C")) && Date.now() < deadline) {
    if (dev.exitCode !== null) throw new Error(`modelgate dev exited early:\n${lines.join("\n")}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return run;
}

/** Runs every curl line dev printed, as a newcomer would paste it. */
async function runCurls(curls: string[]): Promise<void> {
  for (const curl of curls) {
    const { stdout } = await exec("bash", [
      "-c",
      `${curl.replace(/^curl -s( -i)?/, "curl -s -i")}`,
    ]);
    expect(stdout, curl).toMatch(/^HTTP\/1\.1 200 OK/);
    if (curl.includes("/pay/v1/"))
      expect(stdout).toMatch(
        /pay-usage: slug="tiny-(gpt|nli)", input_tokens=\d+, output_tokens=\d+/,
      );
    if (curl.includes('"tiny-nli"')) expect(stdout).toMatch(/\{"sports":0\.9/);
    else expect(stdout).toMatch(/"object":"response"/);
  }
}

describe("modelgate dev (the README's first command)", () => {
  it("starts the platform, prints curl lines that answer as written, and stops everything on Ctrl-C", async () => {
    await generateFixtures();
    const stateDir = await mkdtemp(join(tmpdir(), "dev-"));
    const dev = await startDev(stateDir);
    try {
      const { lines } = dev;
      const curls = lines.filter((l) => l.startsWith("curl "));
      // Two models, each on both routes.
      expect(curls).toHaveLength(4);
      const runtimePorts = lines.flatMap(
        (l) => /starting runtime for \S+ on 127\.0\.0\.1:(\d+)/.exec(l)?.[1] ?? [],
      );
      expect(runtimePorts).toHaveLength(2);
      // The README's x-project-id example works against dev: the demo key may use `web`.
      expect(curls.filter((c) => c.includes("-H 'x-project-id: web'"))).toHaveLength(1);
      await runCurls(curls);

      expect(await dev.stop()).toBe(0);
      expect(lines).toContain("stopped.");
      for (const port of runtimePorts) {
        await expect(fetch(`http://127.0.0.1:${port}/v2/health/live`)).rejects.toThrow();
      }
    } finally {
      dev.kill();
    }
  }, 120_000);

  it("says the built-in models have random weights and how to serve the real ones", async () => {
    const dev = await startDev(await mkdtemp(join(tmpdir(), "dev-")));
    try {
      const text = dev.lines.join("\n");
      expect(text).toMatch(/random weights/);
      expect(text).toContain("npm run dev -- --models-dir examples/shared-models");
      expect(text).toMatch(/account demo, project web/);
    } finally {
      await dev.stop();
      dev.kill();
    }
  }, 120_000);

  it("keeps the demo key and payment secret across restarts, so copied curl lines keep working", async () => {
    const stateDir = await mkdtemp(join(tmpdir(), "dev-"));
    const keyOf = (lines: string[]) => lines.find((l) => /^\s+mg_live_/.test(l))?.trim();
    const first = await startDev(stateDir);
    const firstCurls = first.lines.filter((l) => l.startsWith("curl "));
    const firstKey = keyOf(first.lines);
    expect(await first.stop()).toBe(0);
    const secretFile = join(stateDir, "pay-secret");
    const firstSecret = await readFile(secretFile, "utf8");

    const second = await startDev(stateDir);
    try {
      expect(firstKey).toMatch(/^mg_live_/);
      expect(keyOf(second.lines)).toBe(firstKey);
      // The lines printed by the first run (same key, same signing secret) still answer.
      // The gateway's port changed (--port 0), so they are pointed at the new one.
      const address = /gateway (http:\/\/\S+?),/.exec(second.lines.join("\n"))![1]!;
      const oldAddress = /gateway (http:\/\/\S+?),/.exec(first.lines.join("\n"))![1]!;
      // Each payment line carries its own signature; a second use of one is a replay, so the
      // first run's payment lines are checked for their key and kid, and the API-key lines run.
      await runCurls(
        firstCurls
          .filter((c) => !c.includes("/pay/v1/"))
          .map((c) => c.replaceAll(oldAddress, address)),
      );
      expect(await readFile(secretFile, "utf8")).toBe(firstSecret);
      expect((await stat(secretFile)).mode & 0o777).toBe(0o600);
      await runCurls(second.lines.filter((l) => l.startsWith("curl ") && l.includes("/pay/v1/")));
    } finally {
      await second.stop();
      second.kill();
    }
  }, 180_000);
});
