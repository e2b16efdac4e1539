// The beside windows' timeline (`--timeline`): what ran in each slice of a
// window beside the interactive requests sent in it, so that the moments
// holding the p99 can be named instead of guessed. Each slice has the
// gateway's, the runtime's and PostgreSQL's CPU (ms of CPU per ms of wall
// time), the autovacuum workers and client statements active in the store,
// and the batch lines finished; each interactive request is placed in the
// slice it was sent in.
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import pg from "pg";
import { fmt, median, quantile } from "../runtime/stats.js";

export interface Slice {
  at: number;
  cpu: number[];
  autovacuum: number;
  active: number;
  done: number;
  /**
   * GC time so far (ms) of the gateway, the runtime and this process (the
   * load generator), and each one's longest event-loop delay since the
   * previous sample (ms).
   */
  gcMs: number[];
  lagMs: number[];
  /** The store's checkpoints so far (timed and requested). */
  checkpoints: number;
  /** The longest-running active client statement, its first words and milliseconds so far. */
  statement: string;
}

/** A process's pauses: GC time so far, and its event loop's longest delay since the last read. */
export interface Pauses {
  gcMs: number;
  lagMaxMs: number;
}

/** This process's own pauses: the load generator's (what the servers' probes serve, ./gc-probe.ts). */
let ownGcMs = 0;
const ownDelay = monitorEventLoopDelay({ resolution: 5 });
let watching = false;
function watchOwnPauses(): void {
  if (watching) return;
  watching = true;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) ownGcMs += entry.duration;
  }).observe({ entryTypes: ["gc"] });
  ownDelay.enable();
}
function ownPauses(): Pauses {
  const pauses = { gcMs: ownGcMs, lagMaxMs: ownDelay.max / 1e6 };
  ownDelay.reset();
  return pauses;
}

/** A server child's pauses, from its probe (./gc-probe.ts); NaN when it has none. */
export async function probePauses(port: number): Promise<Pauses> {
  try {
    return (await (await fetch(`http://127.0.0.1:${port}/`)).json()) as Pauses;
  } catch {
    return { gcMs: Number.NaN, lagMaxMs: Number.NaN };
  }
}

export interface Timeline {
  stop(): Promise<Slice[]>;
}

/** Samples every `everyMs` until stopped; `cpu` reads the processes' CPU seconds. */
export async function startTimeline(
  databaseUrl: string,
  cpu: () => Promise<number[]>,
  /** The gateway's and the runtime's pauses. */
  pauses: () => Promise<Pauses[]>,
  everyMs = 250,
): Promise<Timeline> {
  watchOwnPauses();
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const slices: Slice[] = [];
  let running = true;
  const sample = async (): Promise<Slice> => {
    const [cpuNow, servers, row] = await Promise.all([
      cpu(),
      pauses(),
      client.query<{
        av: number;
        active: number;
        done: number;
        checkpoints: number;
        statement: string | null;
      }>(
        `SELECT
           (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker')::int AS av,
           (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
              AND state = 'active' AND pid <> pg_backend_pid())::int AS active,
           (SELECT coalesce(sum(completed + failed), 0) FROM batch_counts)::int AS done,
           (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)::int AS checkpoints,
           (SELECT round(extract(epoch FROM clock_timestamp() - query_start) * 1000) || ' ms: ' ||
                   left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 70)
              FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'active'
                AND pid <> pg_backend_pid() ORDER BY query_start LIMIT 1) AS statement`,
      ),
    ]);
    const r = row.rows[0]!;
    const all = [...servers, ownPauses()];
    return {
      at: performance.now(),
      cpu: cpuNow,
      autovacuum: r.av,
      active: r.active,
      done: r.done,
      gcMs: all.map((p) => p.gcMs),
      lagMs: all.map((p) => p.lagMaxMs),
      checkpoints: r.checkpoints,
      statement: r.statement ?? "",
    };
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

/** One slice's figures, from two samples and the requests sent between them. */
interface SliceFigures {
  from: number;
  wallMs: number;
  latencies: number[];
  cpu: number[];
  autovacuum: boolean;
  active: number;
  lines: number;
  /** GC ms in the slice and the longest event-loop delay, gateway / runtime / load generator. */
  gcMs: number[];
  lagMs: number[];
  checkpoint: boolean;
  statement: string;
}

function figuresOf(slices: Slice[], sent: Sent[]): SliceFigures[] {
  const out: SliceFigures[] = [];
  for (let i = 1; i < slices.length; i++) {
    const from = slices[i - 1]!;
    const to = slices[i]!;
    const wall = to.at - from.at;
    out.push({
      from: from.at,
      wallMs: wall,
      latencies: sent.filter(([at]) => at >= from.at && at < to.at).map(([, ms]) => ms),
      cpu: to.cpu.map((end, k) => ((end - from.cpu[k]!) * 1000) / wall),
      autovacuum: from.autovacuum > 0 || to.autovacuum > 0,
      active: to.active,
      lines: to.done - from.done,
      gcMs: to.gcMs.map((end, k) => end - from.gcMs[k]!),
      lagMs: to.lagMs,
      checkpoint: to.checkpoints > from.checkpoints,
      statement: to.statement,
    });
  }
  return out;
}

/**
 * Lines of text: per slice, the requests sent in it (count, p99 within,
 * those over `slowMs`), the CPU of each process, the GC time of the gateway
 * and of the load generator, the gateway's longest event-loop delay, the
 * store's activity and the batch lines done; then where the slow requests fall.
 */
export function describeTimeline(
  label: string,
  slices: Slice[],
  sent: Sent[],
  slowMs: number,
): string[] {
  const lines = [
    `timeline ${label}: slow = over ${fmt(slowMs)} ms; cpu = CPU ms per ms, gateway/runtime/pg; gc = GC ms, gateway/runtime/load generator; lag = their longest event-loop delays (ms)`,
  ];
  const origin = slices[0]?.at ?? 0;
  let slowTotal = 0;
  const slowWhere = { autovacuum: 0, firstSecond: 0 };
  for (const f of figuresOf(slices, sent)) {
    const slow = f.latencies.filter((ms) => ms > slowMs).length;
    slowTotal += slow;
    if (f.autovacuum) slowWhere.autovacuum += slow;
    if (f.from - origin < 1000) slowWhere.firstSecond += slow;
    lines.push(
      `  ${((f.from - origin) / 1000).toFixed(2)}s n=${f.latencies.length} p99=${fmt(quantile(f.latencies, 0.99))} max=${fmt(Math.max(0, ...f.latencies))} slow=${slow} cpu=${f.cpu.map(fmt).join("/")} gc=${f.gcMs.map(fmt).join("/")} lag=${f.lagMs.map(fmt).join("/")} av=${f.autovacuum ? 1 : 0}${f.checkpoint ? " checkpoint" : ""} active=${f.active} lines=${f.lines}${f.statement ? ` [${f.statement}]` : ""}`,
    );
  }
  lines.push(
    `  ${label}: ${slowTotal} slow requests, ${slowWhere.firstSecond} in the first second, ${slowWhere.autovacuum} beside autovacuum`,
  );
  return lines;
}

/**
 * What the slow requests (over `slowMs`) of one side's windows had around
 * them, against all its requests: for each suspect, the share of slow
 * requests sent in a slice where it happened beside the share of all
 * requests sent in such a slice. A suspect that makes the p99 holds a much
 * larger share of the slow requests than of all; one that does not, about
 * the same share. Also the side's GC time per second of the gateway and of
 * the load generator, and the median of the gateway's longest event-loop
 * delays per slice.
 */
export function describeSuspects(
  side: string,
  windows: ReadonlyArray<{ slices: Slice[]; sent: Sent[] }>,
  slowMs: number,
): string[] {
  const figures = windows.flatMap((w) => figuresOf(w.slices, w.sent));
  const suspects: Array<[string, (f: SliceFigures) => boolean]> = [
    ["gateway GC over 5 ms in the slice", (f) => f.gcMs[0]! > 5],
    ["gateway event-loop delay over 20 ms", (f) => f.lagMs[0]! > 20],
    ["runtime GC over 5 ms", (f) => f.gcMs[1]! > 5],
    ["runtime event-loop delay over 20 ms", (f) => f.lagMs[1]! > 20],
    ["load generator GC over 5 ms", (f) => f.gcMs[2]! > 5],
    ["load generator event-loop delay over 20 ms", (f) => f.lagMs[2]! > 20],
    ["three servers over 1.2 cores", (f) => f.cpu.reduce((a, b) => a + b, 0) > 1.2],
    ["PostgreSQL over 0.15 cores", (f) => (f.cpu[2] ?? 0) > 0.15],
    ["autovacuum", (f) => f.autovacuum],
    ["a checkpoint", (f) => f.checkpoint],
    ["over 40 batch lines", (f) => f.lines > 40],
  ];
  const all = figures.reduce((n, f) => n + f.latencies.length, 0);
  const slowOf = (f: SliceFigures) => f.latencies.filter((ms) => ms > slowMs).length;
  const slow = figures.reduce((n, f) => n + slowOf(f), 0);
  const seconds = figures.reduce((n, f) => n + f.wallMs, 0) / 1000;
  const pct = (n: number, of: number) => `${((100 * n) / Math.max(1, of)).toFixed(1)}%`;
  const lines = [
    `suspects ${side}: ${slow} of ${all} requests over ${fmt(slowMs)} ms; GC ms per second, gateway / runtime / load generator ${[0, 1, 2].map((k) => fmt(figures.reduce((n, f) => n + f.gcMs[k]!, 0) / seconds)).join(" / ")}; longest event-loop delay per slice, median, same order ${[0, 1, 2].map((k) => fmt(median(figures.map((f) => f.lagMs[k]!)))).join(" / ")} ms`,
  ];
  for (const [name, test] of suspects) {
    const hit = figures.filter(test);
    lines.push(
      `  ${name}: ${pct(
        hit.reduce((n, f) => n + slowOf(f), 0),
        slow,
      )} of the slow requests, ${pct(
        hit.reduce((n, f) => n + f.latencies.length, 0),
        all,
      )} of all (${hit.length} of ${figures.length} slices)`,
    );
  }
  return lines;
}
