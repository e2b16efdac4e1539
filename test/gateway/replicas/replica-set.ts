import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { replayJournals, splitCompleteLines } from "../../../gateway/outbox/journal-lines.js";
import { journalPath } from "../../../gateway/outbox/outbox-journals.js";
import type { Database } from "../../../gateway/store/database.js";
import { freePort } from "../../support/free-port.js";
export { until } from "../../support/until.js";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { startPlatform, type Platform } from "../support/platform.js";
import { BROKE_AGENT } from "./mixed-load.js";

/**
 * Gateway replicas as a Deployment runs them: separate `modelgate gateway`
 * processes, each with its own state folder (its journals), sharing one
 * PostgreSQL (the ledger) and one Valkey (limits, used signatures). The
 * platform gives them their runtimes, keys file, signing secrets and
 * payment provider.
 */
export interface Replica {
  index: number;
  url: string;
  opsUrl: string;
  stateDir: string;
  process: ServiceProcess;
}

export interface ReplicaOptions {
  platform: Platform;
  index: number;
  databaseUrl: string;
  /** Absent: limits and used signatures in the process, as one replica keeps them. */
  valkeyUrl?: string;
  /** Ports and state folder of a replica started before: a restart on the same folder. */
  previous?: Replica;
  logLevel?: string;
}

export async function startReplica(options: ReplicaOptions): Promise<Replica> {
  const { platform, index, previous } = options;
  const dir = dirname(platform.stateDir);
  const stateDir = previous?.stateDir ?? join(dir, `replica-${index}`);
  const port = previous ? Number(new URL(previous.url).port) : await freePort();
  const metricsPort = previous ? Number(new URL(previous.opsUrl).port) : await freePort();
  const process = await startServiceProcess({
    args: [
      "gateway",
      "--registry=file",
      `--models-dir=${dir}`,
      `--keys-file=${join(dir, "keys.yaml")}`,
      `--state-dir=${stateDir}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      `--pay-provider-url=${platform.provider.url}`,
      `--pay-provider-credential-file=${join(dir, "provider-credential")}`,
      `--pay-signing-secrets-file=${join(dir, "secrets.yaml")}`,
      "--rate-limit-per-minute=6000000",
      "--rate-limit-burst=100000",
      ...(options.valkeyUrl ? [`--valkey-url=${options.valkeyUrl}`, "--replicas=3"] : []),
      `--log-level=${options.logLevel ?? "warn"}`,
    ],
    // From the environment, as the chart passes it from a Secret.
    env: { MODELGATE_DATABASE_URL: options.databaseUrl },
    readyUrl: `http://127.0.0.1:${metricsPort}/readyz`,
  });
  return {
    index,
    url: `http://127.0.0.1:${port}`,
    opsUrl: `http://127.0.0.1:${metricsPort}`,
    stateDir,
    process,
  };
}

export interface ReplicaSet {
  postgres: PostgresServer;
  /** Present when asked for: limits and used signatures shared through it. */
  redis: RedisServer | undefined;
  platform: Platform;
  /** The replicas' ledger. */
  databaseUrl: string;
  /** The test's own reader of that ledger. */
  db: Kysely<Database>;
}

/**
 * One PostgreSQL, a redis-server when `valkey`, the platform (runtimes,
 * keys, provider; its own in-process gateway is not under test, so its
 * ledger is another database and every row in this one came from a
 * replica), and `count` replicas pushed into `replicas` as they start.
 */
export async function startReplicaSet(options: {
  count: number;
  valkey: boolean;
  replicas: Replica[];
}): Promise<ReplicaSet> {
  const [postgres, redis] = await Promise.all([
    startPostgresServer(),
    options.valkey ? startRedisServer() : Promise.resolve(undefined),
  ]);
  const databaseUrl = await postgres.createDatabase();
  const platform = await startPlatform({
    config: { databaseUrl: await postgres.createDatabase() },
  });
  platform.provider.ledger.setAllowance(BROKE_AGENT, 0);
  const started = await Promise.all(
    Array.from({ length: options.count }, (_, index) =>
      startReplica({
        platform,
        index,
        databaseUrl,
        ...(redis ? { valkeyUrl: redis.url } : {}),
      }),
    ),
  );
  options.replicas.push(...started);
  return { postgres, redis, platform, databaseUrl, db: ledgerDb(databaseUrl) };
}

/** Stops all of it, after saying why any replica that died on its own during the test exited. */
export async function stopReplicaSet(
  set: ReplicaSet | undefined,
  replicas: readonly Replica[],
): Promise<void> {
  for (const r of replicas) {
    const code = r.process.child.exitCode ?? r.process.child.signalCode;
    if (code !== null && code !== 0 && !r.process.killedByTest)
      console.error(
        `replica ${r.index} exited (${code}):\n${r.process.logs.slice(-20).join("\n")}`,
      );
  }
  await set?.db.destroy();
  for (const replica of replicas) await replica.process.stop();
  await set?.platform.close();
  await set?.redis?.close();
  await set?.postgres.stop();
}

/** One sample of a replica's /metrics, by exact series (e.g. `name{label="v"}`). */
export async function metricOf(replica: Replica, series: string): Promise<number | undefined> {
  const text = await (await fetch(`${replica.opsUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Records a replica's journals still hold for the ledger (both outboxes). */
export async function pendingRecords(replica: Replica): Promise<number> {
  const usage = await metricOf(replica, 'modelgate_outbox_pending_records{outbox="usage"}');
  const settlements = await metricOf(
    replica,
    'modelgate_outbox_pending_records{outbox="settlements"}',
  );
  return (usage ?? 0) + (settlements ?? 0);
}

/** The test's own reader of the ledger; it survives the server stopping under it. */
export function ledgerDb(databaseUrl: string): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  pool.on("error", () => undefined); // an idle connection cut by a halt: the next query reconnects
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

export interface LedgerTotals {
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

/**
 * What the ledger says an account used, summed by the database: the figure
 * a usage endpoint must report as its totals. (`count` and `sum` are int8,
 * which pg reads as a string.)
 */
export async function ledgerTotals(db: Kysely<Database>, account?: string): Promise<LedgerTotals> {
  let query = db
    .selectFrom("usage_ledger")
    .select([
      sql<string>`count(*)`.as("requests"),
      sql<string>`coalesce(sum(input_tokens), 0)`.as("input_tokens"),
      sql<string>`coalesce(sum(output_tokens), 0)`.as("output_tokens"),
    ]);
  if (account !== undefined) query = query.where("account", "=", account);
  const row = await query.executeTakeFirstOrThrow();
  return {
    requests: Number(row.requests),
    inputTokens: Number(row.input_tokens),
    outputTokens: Number(row.output_tokens),
  };
}

/**
 * The keys (response ids) a replica's journals still owe the ledger, read
 * from its state folder as the next start would replay them: what is lost
 * if the folder is lost first.
 */
export async function owedInFolder(stateDir: string): Promise<string[]> {
  const owed: string[] = [];
  for (const name of ["usage", "settlements"]) {
    const read = (kind: "records" | "acks") =>
      readFile(journalPath(join(stateDir, name), name, kind), "utf8").then(
        (text) => splitCompleteLines(text).lines,
        () => [],
      );
    const replay = replayJournals(await read("records"), await read("acks"));
    owed.push(...replay.pending.map((line) => line.key));
  }
  return owed;
}

/** The replica's log lines with this message, parsed (pino JSON). */
export function logsWith(replica: Replica, msg: string): Record<string, unknown>[] {
  return replica.process.logs
    .filter((line) => line.includes(msg))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((entry) => entry.msg === msg);
}
