import { readFile } from "node:fs/promises";

/** Linux's USER_HZ, the tick /proc/<pid>/stat counts CPU time in. */
export const CLOCK_TICKS = 100;

/**
 * The fields of a /proc/<pid>/stat (or /proc/<pid>/task/<tid>/stat) line
 * after the command name, which may itself hold spaces and ") ". Index 0 is
 * proc(5)'s field 3, the state; so field N of proc(5) is index N - 3
 * (ppid 1, utime 11, stime 12, cutime 13, cstime 14).
 */
export function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** utime + stime of a stat file, in seconds; NaN once the process or thread is gone. */
export async function statCpuSeconds(path: string): Promise<number> {
  try {
    const fields = statFields(await readFile(path, "utf8"));
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}
