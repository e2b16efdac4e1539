import { readdir, readFile } from "node:fs/promises";
import pg from "pg";
import { startPostgresServer } from "../../support/postgres-server.js";
import { CLOCK_TICKS, statFields } from "../support/proc-stat.js";
import type { Child } from "./child-process.js";

/**
 * The throwaway PostgreSQL server of `--postgres` (test/support's: a fresh
 * cluster on a loopback port, fsync off), watched as the suite's "postgres"
 * process so that its CPU per request is reported beside the gateway's.
 *
 * PostgreSQL is many processes: the postmaster, a backend per connection
 * (the gateway's pool opens up to 10), and its background workers. Its CPU
 * is all of them: the postmaster's own and what it has reaped from children
 * that ended (cutime, cstime), plus every live child's. `pids` lists them,
 * for pinning.
 */
export async function startDatabaseServer(): Promise<Child> {
  const server = await startPostgresServer();
  const url = await server.createDatabase("bench");
  const postmaster = await postmasterPid(url);
  const pids = async () => [postmaster, ...(await childrenOf(postmaster))];
  return {
    name: "postgres",
    url,
    pid: postmaster,
    pids,
    async cpuSeconds() {
      const own = await processTimes(postmaster);
      if (!own) return Number.NaN;
      let seconds = (own.utime + own.stime + own.cutime + own.cstime) / CLOCK_TICKS;
      for (const pid of await childrenOf(postmaster)) {
        const child = await processTimes(pid);
        // A child that ended between the listing and the read was reaped:
        // its time is in the postmaster's cutime by the next reading.
        if (child) seconds += (child.utime + child.stime) / CLOCK_TICKS;
      }
      return seconds;
    },
    stop: () => server.stop(),
  };
}

interface ProcessTimes {
  ppid: number;
  utime: number;
  stime: number;
  cutime: number;
  cstime: number;
}

async function processTimes(pid: number): Promise<ProcessTimes | null> {
  try {
    const fields = statFields(await readFile(`/proc/${pid}/stat`, "utf8"));
    return {
      ppid: Number(fields[1]),
      utime: Number(fields[11]),
      stime: Number(fields[12]),
      cutime: Number(fields[13]),
      cstime: Number(fields[14]),
    };
  } catch {
    return null;
  }
}

async function childrenOf(parent: number): Promise<number[]> {
  const pids = (await readdir("/proc")).filter((name) => /^\d+$/.test(name)).map(Number);
  const children: number[] = [];
  for (const pid of pids) if ((await processTimes(pid))?.ppid === parent) children.push(pid);
  return children;
}

/** A backend's parent is the postmaster. */
async function postmasterPid(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    const backend = await processTimes(rows[0]!.pid);
    if (!backend) throw new Error("cannot read the PostgreSQL backend's /proc entry");
    return backend.ppid;
  } finally {
    await client.end();
  }
}
