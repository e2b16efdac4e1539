// The beside windows' timeline (`--timeline`): what ran in each slice of a
// window beside the interactive requests sent in it, so that the moments
// holding the p99 can be named instead of guessed. Each slice has the
// gateway's, the runtime's and PostgreSQL's CPU (ms of CPU per ms of wall
// time), the autovacuum workers and client statements active in the store,
// and the batch lines finished; each interactive request is placed in the
// slice it was sent in.
import pg from "pg";
import { fmt, quantile } from "../runtime/stats.js";

export interface Slice {
  at: number;
  cpu: number[];
  autovacuum: number;
  active: number;
  done: number;
}

export interface Timeline {
  stop(): Promise<Slice[]>;
}

/** Samples every `everyMs` until stopped; `cpu` reads the processes' CPU seconds. */
export async function startTimeline(
  databaseUrl: string,
  cpu: () => Promise<number[]>,
  everyMs = 250,
): Promise<Timeline> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const slices: Slice[] = [];
  let running = true;
  const sample = async (): Promise<Slice> => {
    const [cpuNow, row] = await Promise.all([
      cpu(),
      client.query<{ av: number; active: number; done: number }>(
        `SELECT
           (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker')::int AS av,
           (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
              AND state = 'active' AND pid <> pg_backend_pid())::int AS active,
           (SELECT coalesce(sum(completed + failed), 0) FROM batch_counts)::int AS done`,
      ),
    ]);
    const r = row.rows[0]!;
    return { at: performance.now(), cpu: cpuNow, autovacuum: r.av, active: r.active, done: r.done };
  };
  const loop = (async () => {
    while (running) {
      slices.push(await sample());
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
    slices.push(await sample());
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await client.end();
      return slices;
    },
  };
}

/**
 * Waits until no autovacuum worker runs in the store (`maxMs` at most; false
 * if one still does), then vacuums `batch_lines` itself: autovacuum's
 * launcher looks at a database once a minute, so dead rows left just before
 * would otherwise be vacuumed at any moment of the next minute.
 */
export async function autovacuumDone(databaseUrl: string, maxMs: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const until = performance.now() + maxMs;
    for (;;) {
      const { rows } = await client.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'",
      );
      if (rows[0]!.n === 0) {
        await client.query("VACUUM batch_lines");
        return true;
      }
      if (performance.now() > until) return false;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await client.end();
  }
}

/** One interactive request: when it was sent and how long it took (ms). */
export type Sent = [sentAt: number, latencyMs: number];

/**
 * Lines of text: per slice, the requests sent in it (count, p99 within,
 * those over `slowMs`), the CPU of each process, the store's activity and
 * the batch lines done; then where the slow requests fall.
 */
export function describeTimeline(
  label: string,
  slices: Slice[],
  sent: Sent[],
  slowMs: number,
): string[] {
  const lines = [
    `timeline ${label}: slow = over ${fmt(slowMs)} ms; cpu = CPU ms per ms, gateway/runtime/pg`,
  ];
  const origin = slices[0]?.at ?? 0;
  let slowTotal = 0;
  const slowWhere = { autovacuum: 0, firstSecond: 0 };
  for (let i = 1; i < slices.length; i++) {
    const from = slices[i - 1]!;
    const to = slices[i]!;
    const wall = to.at - from.at;
    const inSlice = sent.filter(([at]) => at >= from.at && at < to.at).map(([, ms]) => ms);
    const slow = inSlice.filter((ms) => ms > slowMs).length;
    slowTotal += slow;
    if (from.autovacuum > 0 || to.autovacuum > 0) slowWhere.autovacuum += slow;
    if (from.at - origin < 1000) slowWhere.firstSecond += slow;
    const cpu = to.cpu.map((end, k) => fmt(((end - from.cpu[k]!) * 1000) / wall)).join("/");
    lines.push(
      `  ${((from.at - origin) / 1000).toFixed(2)}s n=${inSlice.length} p99=${fmt(quantile(inSlice, 0.99))} max=${fmt(Math.max(0, ...inSlice))} slow=${slow} cpu=${cpu} av=${to.autovacuum} active=${to.active} lines=${to.done - from.done}`,
    );
  }
  lines.push(
    `  ${label}: ${slowTotal} slow requests, ${slowWhere.firstSecond} in the first second, ${slowWhere.autovacuum} beside autovacuum`,
  );
  return lines;
}
