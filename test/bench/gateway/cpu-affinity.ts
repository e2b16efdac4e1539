import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";

/**
 * CPU pinning through `taskset`, for the variant where the runtime gets the
 * same CPU budget with and without the gateway in front: the gateway alone on
 * one core, the runtime and the load generator on the other. A process is
 * pinned after it started, with `-a` so that every thread it has moves
 * (libuv's pool, V8's helpers, ORT's threads); threads it makes later inherit
 * the affinity of the thread that makes them.
 */
export interface Pinning {
  /** Pins a running process (all its threads) to a list like "0" or "0,1". */
  pin(pid: number, cpus: string): void;
  /** The affinity list the process had when the benchmark started, e.g. "0,1". */
  original: string;
}

/** Null when taskset is missing or the machine has fewer than two cores. */
export function pinning(): Pinning | null {
  if (availableParallelism() < 2) return null;
  const probe = spawnSync("taskset", ["-c", "-p", String(process.pid)], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) return null;
  // "pid 123's current affinity list: 0,1"
  const original = /list:\s*(\S+)/.exec(probe.stdout)?.[1];
  if (!original) return null;
  return {
    original,
    pin(pid, cpus) {
      const result = spawnSync("taskset", ["-a", "-c", "-p", cpus, String(pid)], {
        encoding: "utf8",
      });
      if (result.error || result.status !== 0) {
        throw new Error(`taskset -a -c -p ${cpus} ${pid} failed: ${result.stderr || result.error}`);
      }
    },
  };
}
