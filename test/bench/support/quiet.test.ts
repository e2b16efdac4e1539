import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { waitQuiet } from "./quiet.js";

/** waitQuiet against real processes: one that never stops running, one that sleeps. */
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

async function node(script: string): Promise<number> {
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(child);
  // Ready once it has printed: a spinning one is then spinning.
  await once(child.stdout, "data");
  return child.pid!;
}

describe("waitQuiet", () => {
  it("gives up on a process that keeps a core busy", async () => {
    const busy = await node('console.log("ready"); for (;;) {}');
    const started = performance.now();
    expect(await waitQuiet([busy], { maxMs: 150 })).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
  });

  it("returns once every process sleeps", async () => {
    const idle = await node('console.log("ready"); setInterval(() => {}, 60_000);');
    const started = performance.now();
    expect(await waitQuiet([idle], { maxMs: 1_000 })).toBe(true);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it("counts a process that is gone as asleep", async () => {
    const gone = await node('console.log("ready");');
    await once(children.at(-1)!, "exit");
    expect(await waitQuiet([gone], { maxMs: 500 })).toBe(true);
  });
});
