import { readdir, readFile } from "node:fs/promises";

/**
 * A process's CPU seconds, all its live threads, from
 * /proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU), or null where
 * that is not readable. /proc/<pid>/stat counts in 10 ms ticks, too coarse
 * for a stream that costs the gateway a few milliseconds, measured one batch
 * at a time. Threads that ended are not counted; the gateway's (libuv's
 * pool, V8's helpers) live as long as it does.
 */
export async function threadCpuSeconds(pid: number): Promise<number | null> {
  try {
    const tasks = await readdir(`/proc/${pid}/task`);
    let nanoseconds = 0;
    for (const tid of tasks) {
      const line = await readFile(`/proc/${pid}/task/${tid}/schedstat`, "utf8").catch(() => "");
      nanoseconds += Number(line.split(" ")[0] ?? 0) || 0;
    }
    return nanoseconds / 1e9;
  } catch {
    return null;
  }
}
