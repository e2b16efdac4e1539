import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { chown, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { freePort } from "./free-port.js";

const run = promisify(execFile);

/**
 * A throwaway PostgreSQL server for the store's tests: a fresh cluster
 * (`initdb`) in a temporary folder, started with `pg_ctl` on a free loopback
 * port, stopped and deleted by `stop()` (or, if the test process exits first,
 * by an exit hook). Debian's `postgresql` package provides the binaries;
 * `.ci/run` installs it.
 *
 * PostgreSQL refuses to run as root, so when the tests run as root the
 * server runs as the package's `postgres` user, which owns the folder.
 * Durability settings are off (fsync, full-page writes): the tests kill
 * gateways, never this server's machine.
 */
export interface PostgresServer {
  /** Superuser URL of the `postgres` database. */
  url: string;
  port: number;
  /** Creates an empty database and returns its URL: one per test keeps tests apart. */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server, keeping its data, as an outage would (connections are cut). */
  halt(): Promise<void>;
  /** Starts a halted server again, on the same port with the same data. */
  resume(): Promise<void>;
  /**
   * Stops every process of the server (SIGSTOP) without closing anything: a
   * hung server, whose connections stay open and whose port still accepts,
   * and which answers nothing.
   */
  freeze(): void;
  /** Lets a frozen server run on (SIGCONT). */
  thaw(): void;
  stop(): Promise<void>;
}

let databaseCounter = 0;

export async function startPostgresServer(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const asUser = runAsUser();
  const dir = await mkdtemp(join(tmpdir(), "modelgate-pg-"));
  if (asUser) await chown(dir, asUser.uid, asUser.gid);
  const data = join(dir, "data");
  const command = (program: string, args: string[]) =>
    asUser
      ? run("runuser", ["-u", asUser.name, "--", join(bin, program), ...args])
      : run(join(bin, program), args);

  let stopped = false;
  const stopNow = () => {
    if (stopped) return;
    stopped = true;
    try {
      const stopArgs = ["stop", "-D", data, "-m", "immediate", "-w"];
      if (asUser) {
        execFileSync("runuser", ["-u", asUser.name, "--", join(bin, "pg_ctl"), ...stopArgs], {
          stdio: "ignore",
        });
      } else execFileSync(join(bin, "pg_ctl"), stopArgs, { stdio: "ignore" });
    } catch {
      // Not running (never started, or already gone): nothing to stop.
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // A test process that ends without stop() (a crash, a timeout) must not
  // leave a server running on the shared machine.
  process.once("exit", stopNow);

  try {
    await command("initdb", [
      "-D",
      data,
      "-U",
      "postgres",
      "-A",
      "trust",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
    ]);
    const port = await startOnFreePort(command, data, dir);
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    return {
      url,
      port,
      async createDatabase(name) {
        databaseCounter += 1;
        const database = name ?? `test_${process.pid}_${databaseCounter}`;
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          await client.query(`CREATE DATABASE "${database}"`);
        } finally {
          await client.end();
        }
        return `postgres://postgres@127.0.0.1:${port}/${database}`;
      },
      async halt() {
        await command("pg_ctl", ["stop", "-D", data, "-m", "fast", "-w"]);
      },
      freeze() {
        signalAll(data, "SIGSTOP");
      },
      thaw() {
        signalAll(data, "SIGCONT");
      },
      async resume() {
        await command("pg_ctl", startArguments(data, dir, port));
      },
      async stop() {
        process.removeListener("exit", stopNow);
        if (stopped) return;
        await command("pg_ctl", ["stop", "-D", data, "-m", "fast", "-w"]).catch(() => undefined);
        stopNow();
      },
    };
  } catch (error) {
    process.removeListener("exit", stopNow);
    stopNow();
    throw error;
  }
}

/** Another process may take the port between the probe and the bind: try a few. */
async function startOnFreePort(
  command: (program: string, args: string[]) => Promise<unknown>,
  data: string,
  socketDir: string,
): Promise<number> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = await freePort();
    try {
      await command("pg_ctl", startArguments(data, socketDir, port));
      return port;
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`PostgreSQL did not start: ${String(lastError)}`);
}

function startArguments(data: string, socketDir: string, port: number): string[] {
  const options = [
    `-c listen_addresses=127.0.0.1`,
    `-c port=${port}`,
    `-c unix_socket_directories=${socketDir}`,
    "-c fsync=off",
    "-c full_page_writes=off",
    "-c max_connections=100",
  ].join(" ");
  return [
    "start",
    "-D",
    data,
    "-w",
    "-t",
    "60",
    "-l",
    join(socketDir, "server.log"),
    "-o",
    options,
  ];
}

/** `MODELGATE_PG_BIN`, else the newest of Debian's /usr/lib/postgresql/<version>/bin. */
function postgresBinDir(): string {
  const fromEnv = process.env.MODELGATE_PG_BIN;
  if (fromEnv) return fromEnv;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      "PostgreSQL server binaries not found under /usr/lib/postgresql: install Debian's postgresql package (.ci/run does) or set MODELGATE_PG_BIN",
    );
  }
  return join(root, versions[0]!, "bin");
}

/** PostgreSQL will not run as root: then it runs as the package's `postgres` user. */
function runAsUser(): { name: string; uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const name = "postgres";
  const id = (flag: string) =>
    Number(execFileSync("id", [flag, name], { encoding: "utf8" }).trim());
  return { name, uid: id("-u"), gid: id("-g") };
}

/** Signals the postmaster (its pid is postmaster.pid's first line) and every backend it forked. */
function signalAll(data: string, signal: NodeJS.Signals): void {
  const postmaster = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  const children = execFileSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" })
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map(Number);
  for (const pid of [postmaster, ...children]) process.kill(pid, signal);
}
