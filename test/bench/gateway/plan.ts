/**
 * Every count and duration of one run, decided up front so that its length
 * is known before it starts: about 5 minutes in full, about 30 s with
 * `--quick`. Flags: --quick, --profile (CPU profile of the stand-in suite's
 * gateway child, summarised at the end), --log-level L (the gateway's; its
 * default "info" writes two JSON lines per request, as in production),
 * --valkey (each suite again with its gateway on a real redis-server),
 * --postgres (each suite again with its gateway on a real PostgreSQL server
 * for the ledger and a real redis-server, as several replicas run).
 */
export interface GatewayBenchPlan {
  quick: boolean;
  profile: boolean;
  logLevel: string;
  /** Also run each suite with its gateway's limits and signatures in a real redis-server (`--valkey`). */
  valkey: boolean;
  /** Also run each suite with its gateway's ledger in a real PostgreSQL server and its limits in Valkey (`--postgres`). */
  postgres: boolean;
  /** Hard stop for the whole run; a watchdog ends the process past it. */
  deadlineMs: number;
  clients: number[];
  /** How the informative rows (stand-in, shared layouts) are measured. */
  rows: RoundPlan;
  /**
   * How the rows the targets apply to (the real runtime's pinned rows, and
   * the bare proxy's beside them) are measured: more, shorter rounds, whose
   * median ratio is reported, so that two runs agree.
   */
  targetRows: RoundPlan;
  /** Per half; with pointMs, whichever ends first. */
  halfMaxRequests: number;
  /** Per side, before a suite's first point: JIT, connections, the journals' first writes. */
  warmupMs: number;
  /** The gateway side's warm-up, long enough for the ledger's code to run hot (compare.ts). */
  gatewayWarmupMs: number;
  /** Longest wait, after the gateway's warm-up, for its background compiling to end. */
  warmupSettleMaxMs: number;
  /** Longest wait, after a gateway run, for its background work to end (measure.ts). */
  settleMaxMs: number;
  /** The profiled window after a target suite's pinned points (cpu-split.ts). */
  splitMs: number;
  payClients: number[];
  payPointMs: number;
  /** The real runtime answers one request at a time, at once: no batch window to wait out. */
  runtimeThroughput: { maxBatchSize: number; batchWindowMs: number };
}

/** A point: `rounds` A-B-B-A rounds of halves `halfMs` long (direct, gateway, gateway, direct). */
export interface RoundPlan {
  rounds: number;
  halfMs: number;
}

function flagValue(args: readonly string[], name: string): string | undefined {
  const index = args.indexOf(name);
  return index >= 0 ? args[index + 1] : undefined;
}

export function planFrom(args: readonly string[]): GatewayBenchPlan {
  const quick = args.includes("--quick");
  const valkey = args.includes("--valkey");
  const postgres = args.includes("--postgres");
  const logLevel = flagValue(args, "--log-level") ?? "info";
  if (!/^(fatal|error|warn|info|debug|trace|silent)$/.test(logLevel)) {
    throw new Error("--log-level takes fatal, error, warn, info, debug, trace or silent");
  }
  return {
    quick,
    profile: args.includes("--profile"),
    logLevel,
    valkey,
    postgres,
    // Each set of shared-store suites about doubles the measuring.
    deadlineMs: (quick ? 90_000 : 500_000) * (1 + Number(valkey) + Number(postgres)),
    clients: [1, 16, 64],
    rows: quick ? { rounds: 1, halfMs: 300 } : { rounds: 4, halfMs: 1_000 },
    // A quick run's target rows: 6 rounds of 4 × 150 ms, the median of 6
    // ratios; the single 300 ms round before moved by ±0.18× between runs.
    targetRows: quick ? { rounds: 6, halfMs: 150 } : { rounds: 9, halfMs: 500 },
    halfMaxRequests: 200_000,
    warmupMs: quick ? 200 : 1_500,
    gatewayWarmupMs: quick ? 1_000 : 3_000,
    warmupSettleMaxMs: quick ? 3_000 : 5_000,
    settleMaxMs: quick ? 1_000 : 2_000,
    splitMs: quick ? 1_500 : 4_000,
    payClients: [1, 16],
    payPointMs: quick ? 600 : 3_000,
    runtimeThroughput: { maxBatchSize: 1, batchWindowMs: 0 },
  };
}
