import { execFile, spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { generateFixtures } from "../fixtures/generate.js";

const exec = promisify(execFile);

describe("modelgate dev (the README's first command)", () => {
  it("starts the platform, prints curl lines that answer as written, and stops everything on Ctrl-C", async () => {
    await generateFixtures();
    const stateDir = await mkdtemp(join(tmpdir(), "dev-"));
    const dev = spawn(
      process.execPath,
      ["--import", "tsx", "cli/modelgate.ts", "dev", "--port", "0", "--state-dir", stateDir],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const lines: string[] = [];
    createInterface({ input: dev.stdout }).on("line", (line) => lines.push(line));
    createInterface({ input: dev.stderr }).on("line", (line) => lines.push(line));
    const exited = new Promise<number | null>((resolve) =>
      dev.once("exit", (code) => resolve(code)),
    );
    try {
      const deadline = Date.now() + 90_000;
      while (!lines.some((l) => l.startsWith("Press Ctrl-C")) && Date.now() < deadline) {
        if (dev.exitCode !== null)
          throw new Error(`modelgate dev exited early:\n${lines.join("\n")}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const curls = lines.filter((l) => l.startsWith("curl "));
      // Two models, each on both routes.
      expect(curls).toHaveLength(4);
      const runtimePorts = lines.flatMap(
        (l) => /starting runtime for \S+ on 127\.0\.0\.1:(\d+)/.exec(l)?.[1] ?? [],
      );
      expect(runtimePorts).toHaveLength(2);

      for (const curl of curls) {
        const { stdout } = await exec("bash", [
          "-c",
          `${curl.replace(/^curl -s( -i)?/, "curl -s -i")}`,
        ]);
        expect(stdout).toMatch(/^HTTP\/1\.1 200 OK/);
        if (curl.includes("/pay/v1/"))
          expect(stdout).toMatch(
            /pay-usage: slug="tiny-(gpt|nli)", input_tokens=\d+, output_tokens=\d+/,
          );
        if (curl.includes('"tiny-nli"')) expect(stdout).toMatch(/\{"sports":0\.9/);
        else expect(stdout).toMatch(/"object":"response"/);
      }

      dev.kill("SIGINT");
      expect(await exited).toBe(0);
      expect(lines).toContain("stopped.");
      for (const port of runtimePorts) {
        await expect(fetch(`http://127.0.0.1:${port}/v2/health/live`)).rejects.toThrow();
      }
    } finally {
      if (dev.exitCode === null) dev.kill("SIGKILL");
    }
  }, 120_000);
});
