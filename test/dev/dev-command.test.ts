import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { generateFixtures } from "../fixtures/generate.js";
import { startDev } from "../support/dev-process.js";

const exec = promisify(execFile);

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
  // Each run's state folder (the embedded store alone is tens of MB), removed at the end.
  const stateDirs: string[] = [];
  const newStateDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), "dev-"));
    stateDirs.push(dir);
    return dir;
  };
  afterAll(async () => {
    for (const dir of stateDirs) await rm(dir, { recursive: true, force: true });
  });

  it("starts the platform, prints curl lines that answer as written, and stops everything on Ctrl-C", async () => {
    await generateFixtures();
    const stateDir = await newStateDir();
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
    const dev = await startDev(await newStateDir());
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
    const stateDir = await newStateDir();
    const first = await startDev(stateDir);
    const firstCurls = first.lines.filter((l) => l.startsWith("curl "));
    const firstKey = first.apiKey;
    expect(await first.stop()).toBe(0);
    const secretFile = join(stateDir, "pay-secret");
    const firstSecret = await readFile(secretFile, "utf8");

    const second = await startDev(stateDir);
    try {
      expect(firstKey).toMatch(/^mg_live_/);
      expect(second.apiKey).toBe(firstKey);
      // The lines printed by the first run (same key, same signing secret) still answer.
      // The gateway's port changed (--port 0), so they are pointed at the new one.
      // Each payment line carries its own signature; a second use of one is a replay, so the
      // first run's payment lines are checked for their key and kid, and the API-key lines run.
      await runCurls(
        firstCurls
          .filter((c) => !c.includes("/pay/v1/"))
          .map((c) => c.replaceAll(first.address, second.address)),
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
