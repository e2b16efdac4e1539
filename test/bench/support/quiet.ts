import { readdirSync, readFileSync } from "node:fs";
import { statFields } from "./proc-stat.js";

/**
 * Waits until every thread of these processes is asleep (none running or
 * waiting for a core, by /proc/<pid>/task/<tid>/stat) at `settle` readings
 * in a row, `pollMs` apart, or until `maxMs` have passed; returns whether
 * they went quiet. A process that is gone counts as asleep. The reads are
 * synchronous, on this thread, so that the waiting wakes no thread of
 * libuv's pool, which may stand on another core.
 */
export async function waitQuiet(
  pids: readonly number[],
  {
    pollMs = 1,
    settle = 2,
    maxMs = 250,
  }: { pollMs?: number; settle?: number; maxMs?: number } = {},
): Promise<boolean> {
  const deadline = performance.now() + maxMs;
  let asleepReadings = 0;
  while (performance.now() < deadline) {
    asleepReadings = allAsleep(pids) ? asleepReadings + 1 : 0;
    if (asleepReadings >= settle) return true;
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  return false;
}

function allAsleep(pids: readonly number[]): boolean {
  for (const pid of pids) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tasks) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "latin1");
      } catch {
        continue;
      }
      if (statFields(stat)[0] === "R") return false;
    }
  }
  return true;
}
