import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent } from "undici";
import { fixtureFolder } from "../../runtime/support/runtime-server.js";
import { startRuntimeProcess } from "../runtime/runtime-process.js";
import type { Child } from "../gateway/child-process.js";
import { pinning } from "../gateway/cpu-affinity.js";
import { writeGatewayFiles } from "../gateway/gateway-files.js";
import { startChild } from "../gateway/child-process.js";
import { startGateway } from "../gateway/processes.js";
import { bootstrapInterval } from "../support/bootstrap.js";
import { buildCProgram } from "../support/c-programs.js";
import { waitQuiet } from "../support/quiet.js";
import { startSseBurst, type SseBurst } from "../support/sse-burst.js";
import { threadCpuSeconds } from "./thread-cpu.js";

/**
 * Section (b) of the streaming benchmark: time to the first
 * `response.output_text.delta` through the gateway against the same stream
 * from the runtime directly. As in bench:gateway, the runtime (tiny-gpt) and
 * the gateway (wired as `modelgate gateway` wires it, request logs on at
 * info) are child processes, and so are the clients of a burst
 * (../support/sse-burst.c, which costs the core it shares with the gateway a
 * few hundredths of a millisecond a stream where undici's clients cost half
 * of one); the independent clients are undici's, in this process. Two layouts: all
 * processes sharing the cores (informative on a two-core machine, where the
 * gateway's work competes with the runtime's), and pinned, with the runtime
 * alone on core 1, as a pod with its own CPU is deployed, and the gateway and
 * the clients on core 0 (the target applies there). The clients are idle
 * while they wait for a first token, so at one client the gateway has its
 * core to itself when it matters; at sixteen, their reading competes with it.
 *
 * Each round sends the same arrivals to each side (a point's clients, see
 * `Arrivals`): the runtime directly; the relay (../support/tcp-relay.c: a C program copying
 * bytes between two TCP connections, the least any process in the path can
 * add); the floor (../gateway/bare-proxy.ts relaying chunks: a Node proxy
 * that only relays); both pinned where the gateway is; and the gateway,
 * rotating which goes first, each once every process of the sides is asleep
 * (so that none meets another side's leftovers); a side's p50 is taken over
 * every first token it measured, and the per-round difference of p50s is
 * reported as the spread. The floor
 * splits the added time in the same run: floor minus direct is what the two
 * extra loopback hops and a Node process in the path cost, which no change
 * to the gateway removes; through minus floor is the gateway's own work
 * (hooks, admission, the relay, and whatever its event loop was busy with
 * when a first token came: another stream's terminal write, the ledger's
 * batch). Beside it, the gateway's CPU time per stream (from /proc's per-thread
 * schedstat, in nanoseconds, all its threads, the whole stream: relay, billing, storing): the part of its cost
 * that the load of a shared machine does not blur. A last side, the
 * gateway again with `store: false`, in the same rotation, prices the stored
 * response's write (CPU per stream, stored minus unstored).
 */
export interface GatewayStreamingOptions {
  rounds: number;
}

/** A measured point: how many clients, how they send, how many rounds, judged or informative. */
interface Point {
  name: string;
  clients: number;
  arrivals: Arrivals;
  rounds: number;
  judged: boolean;
}

/**
 * The target's two points: one client, and sixteen sending at the same
 * instant every round (sixteen streams in flight, as the target has been
 * judged since it was set: the worst case, where each request waits for
 * the ones before it, in the gateway and then in the runtime). Beside them, informative, sixteen independent
 * clients, each pausing about five stream-lengths between its streams, so
 * that arrivals come spread out, as users' do, at a load the gateway's one
 * core carries (a pause as short as a stream offered about 900 streams a
 * second, more than one core's worth of the gateway's CPU per stream with
 * the embedded store: docs/streaming-measurements.md, "Sixteen at once
 * (fourth session)").
 */
function pointsOf(rounds: number): Point[] {
  return [
    // A hundred rounds of one client in a quick run, three hundred of
    // sixteen at once: there the per-round difference spreads over tens of
    // ms, thirty rounds moved the p50 by more than 1 ms from run to run, and
    // a hundred left a 95% interval about ±0.35 ms wide, as wide as the runs
    // themselves differed.
    {
      name: "1 client",
      clients: 1,
      arrivals: { kind: "burst" },
      rounds: rounds * 20,
      judged: true,
    },
    {
      name: "16 clients",
      clients: 16,
      arrivals: { kind: "burst" },
      rounds: rounds * 60,
      judged: true,
    },
    {
      name: "16 independent clients",
      clients: 16,
      arrivals: { kind: "independent", streams: 3, meanPauseMs: 50 },
      rounds: rounds * 2,
      judged: false,
    },
  ];
}

export type Row = [string, string, string];

/**
 * Rounds of sixteen at once on every side before the first point, and how
 * many of them at each end are compared. A gateway in service runs code V8
 * has long since optimized; one that has answered a few hundred streams does
 * not yet: traced, V8 was still compiling the request path (hundreds of
 * Maglev and TurboFan jobs, on helper threads that share the gateway's core)
 * for the first few thousand streams, and the gateway's CPU per stream and
 * the added first-token time fell with them (docs/streaming-measurements.md,
 * "Twenty-first session"). Counted in rounds, not seconds: V8 tiers up on
 * how often code runs, so a slower machine needs no more of them.
 */
const WARM_ROUNDS = 600;
const WARM_COMPARED = 50;

const MODEL = "tiny-gpt";
const ASK = { model: MODEL, input: "Hello", temperature: 0, max_output_tokens: 8, stream: true };
const BODY = JSON.stringify(ASK);
const UNSTORED_BODY = JSON.stringify({ ...ASK, store: false });

/** The bench's InferenceModel: a text-generation model whose endpoint is the runtime child. */
function modelYaml(runtimeUrl: string): string {
  return [
    "apiVersion: serving.modelgate.dev/v1alpha1",
    "kind: InferenceModel",
    "metadata:",
    `  name: ${MODEL}`,
    "spec:",
    "  task: text-generation",
    "  source: { uri: file:///models/x }",
    `  pricing: { serviceSlug: ${MODEL} }`,
    "status:",
    `  endpoint: ${runtimeUrl}`,
    "",
  ].join("\n");
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
};
const spread = (values: number[]) =>
  `[${Math.min(...values).toFixed(2)}, ${Math.max(...values).toFixed(2)}]`;

const signed = (value: number) => `${value >= 0 ? "+" : ""}${value.toFixed(2)}`;

/** Milliseconds from sending the request to the first chunk holding a delta; reads to the end. */
async function firstDeltaMs(
  agent: Agent,
  origin: string,
  headers: Record<string, string>,
  body: string,
): Promise<number> {
  const started = performance.now();
  const response = await agent.request({
    origin,
    path: "/v1/responses",
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  if (response.statusCode !== 200) {
    throw new Error(`${origin}: ${response.statusCode} ${await response.body.text()}`);
  }
  let first = NaN;
  // Only the last chunk's tail can hold the start of a split event name.
  let tail = "";
  for await (const chunk of response.body as AsyncIterable<Buffer>) {
    if (!Number.isNaN(first)) continue;
    const text = tail + chunk.toString("latin1");
    if (text.includes("output_text.delta")) first = performance.now() - started;
    tail = text.slice(-32);
  }
  if (Number.isNaN(first)) throw new Error(`${origin}: a stream with no delta`);
  return first;
}

type Side = "direct" | "relay" | "floor" | "through" | "unstored";
const SIDES: readonly Side[] = ["direct", "relay", "floor", "through", "unstored"];

interface Measured {
  firsts: Record<Side, number[]>;
  /** The same first tokens, a list per round: what the interval resamples. */
  byRound: Record<Side, number[][]>;
  /** Per round: p50 through minus p50 direct, relay minus direct, floor minus direct, through minus floor. */
  perRound: { added: number[]; relay: number[]; hops: number[]; own: number[] };
  /** The gateway's CPU seconds (all threads) per stream, over the through and the unstored batches. */
  cpuPerStream: { through: number; unstored: number };
  /** Sides that began before every process of the sides was asleep (after 250 ms of waiting). */
  unquiet: number;
}

/**
 * How a round's clients send. "burst": each client sends one stream and all
 * send at the same instant, every round (sixteen simultaneous arrivals: the
 * worst case, where each request waits for the ones before it).
 * "independent": each client sends `streams` streams one after another,
 * pausing before each for a random time (exponential, mean `meanPauseMs`),
 * as independent users do; the pauses are drawn once per round and every
 * side of the round replays them, so the sides see the same arrivals.
 */
export type Arrivals =
  { kind: "burst" } | { kind: "independent"; streams: number; meanPauseMs: number };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Each client's pauses for one round, in ms (exponential, by inversion). */
function drawPauses(clients: number, streams: number, meanMs: number): number[][] {
  return Array.from({ length: clients }, () =>
    Array.from({ length: streams }, () => -Math.log(1 - Math.random()) * meanMs),
  );
}

async function measure(
  agent: Agent,
  bursts: SseBurst,
  origins: Record<Side, string>,
  gateway: Child,
  /** Every process of the sides, which each side waits to see asleep. */
  quiet: readonly number[],
  apiKey: string,
  clients: number,
  rounds: number,
  arrivals: Arrivals = { kind: "burst" },
): Promise<Measured> {
  const firsts: Record<Side, number[]> = {
    direct: [],
    relay: [],
    floor: [],
    through: [],
    unstored: [],
  };
  const byRound: Record<Side, number[][]> = {
    direct: [],
    relay: [],
    floor: [],
    through: [],
    unstored: [],
  };
  const perRound = {
    added: [] as number[],
    relay: [] as number[],
    hops: [] as number[],
    own: [] as number[],
  };
  const cpu = { through: 0, unstored: 0 };
  let unquiet = 0;
  const gatewaySide = (side: Side): side is "through" | "unstored" =>
    side === "through" || side === "unstored";
  const cpuSeconds = async () => (await threadCpuSeconds(gateway.pid)) ?? gateway.cpuSeconds();
  let pauses: number[][] = [];
  const client = async (side: Side, headers: Record<string, string>, body: string, c: number) => {
    const firsts: number[] = [];
    for (const pause of pauses[c]!) {
      await sleep(pause);
      firsts.push(await firstDeltaMs(agent, origins[side], headers, body));
    }
    return firsts;
  };
  const batch = async (side: Side) => {
    const headers: Record<string, string> = gatewaySide(side) ? { "x-api-key": apiKey } : {};
    const body = side === "unstored" ? UNSTORED_BODY : BODY;
    // Each side's arrivals meet quiet processes. What the gateway does after
    // a side's streams end (their stored responses' INSERT, the access log)
    // would otherwise run during the next side's arrivals, on the core the
    // clients share with it, and in the rotation of five the runtime
    // directly always came right after one of the gateway's two sides.
    if (!(await waitQuiet(quiet))) unquiet++;
    const before = gatewaySide(side) ? await cpuSeconds() : 0;
    const measured =
      arrivals.kind === "burst"
        ? [await bursts.burst(origins[side], headers, body, clients)]
        : await Promise.all(
            Array.from({ length: clients }, (_, c) => client(side, headers, body, c)),
          );
    if (gatewaySide(side)) cpu[side] += (await cpuSeconds()) - before;
    return measured.flat();
  };
  for (let i = 0; i < rounds; i++) {
    if (arrivals.kind === "independent") {
      pauses = drawPauses(clients, arrivals.streams, arrivals.meanPauseMs);
    }
    const round: Partial<Record<Side, number>> = {};
    // Each side first, second and so on in turn, so that none always follows another.
    for (let k = 0; k < SIDES.length; k++) {
      const side = SIDES[(i + k) % SIDES.length]!;
      const measured = await batch(side);
      firsts[side].push(...measured);
      byRound[side].push(measured);
      round[side] = median(measured);
    }
    perRound.added.push(round.through! - round.direct!);
    perRound.relay.push(round.relay! - round.direct!);
    perRound.hops.push(round.floor! - round.direct!);
    perRound.own.push(round.through! - round.floor!);
  }
  const streams = rounds * clients * (arrivals.kind === "burst" ? 1 : arrivals.streams);
  return {
    firsts,
    byRound,
    perRound,
    cpuPerStream: { through: cpu.through / streams, unstored: cpu.unstored / streams },
    unquiet,
  };
}

export async function gatewayStreamingSection(options: GatewayStreamingOptions): Promise<Row[]> {
  const rows: Row[] = [];
  const maxClients = Math.max(...pointsOf(options.rounds).map((point) => point.clients));
  const runtime = await startRuntimeProcess({
    path: await fixtureFolder(MODEL),
    modelId: MODEL,
    threads: 1,
    // Every client's sequence in the running batch; no prefix cache, so that every prefill is alike.
    throughput: { generationConcurrency: maxClients, prefixCacheBytes: 0 },
  });
  const setup = await writeGatewayFiles({
    model: MODEL,
    runtimeUrl: runtime.url,
    sinkUrl: null,
    providerUrl: null,
    logLevel: "info",
  });
  await writeFile(join(setup.flags.modelsDir!, `${MODEL}.yaml`), modelYaml(runtime.url));
  let gateway: Child | null = null;
  let floor: Child | null = null;
  let relay: Child | null = null;
  let bursts: SseBurst | null = null;
  const agent = new Agent({ connections: maxClients * 2, keepAliveTimeout: 30_000 });
  try {
    gateway = await startGateway(setup, null);
    floor = await startChild({
      name: "floor",
      script: fileURLToPath(new URL("../gateway/bare-proxy.ts", import.meta.url)),
      args: [runtime.url, "chunks"],
      ready: "ipc",
    });
    relay = await startChild({
      name: "relay",
      script: await buildCProgram("tcp-relay"),
      native: true,
      args: [new URL(runtime.url).port],
      ready: "stdout-line",
    });
    bursts = await startSseBurst();
    const origins = {
      direct: runtime.url,
      relay: relay.url,
      floor: floor.url,
      through: gateway.url,
      unstored: gateway.url,
    };
    const quiet = [runtime.pid, relay.pid, floor.pid, gateway.pid];
    const warm = (rounds: number) =>
      measure(agent, bursts!, origins, gateway!, quiet, setup.apiKey, maxClients, rounds);
    // Before the first layout: the JIT of every Node process of the sides.
    // Its ends are reported, so that a run shows what the warm-up took off.
    const early = await warm(WARM_COMPARED);
    await warm(WARM_ROUNDS - 2 * WARM_COMPARED);
    const late = await warm(WARM_COMPARED);
    const addedOf = (m: Measured) => median(m.firsts.through) - median(m.firsts.direct);
    const perStream = (m: Measured) => (m.cpuPerStream.through * 1000).toFixed(2);
    rows.push([
      `gateway warm-up, ${maxClients} clients, shared`,
      `${WARM_ROUNDS} rounds: gateway CPU ${perStream(early)} ms per whole stream in the first ${WARM_COMPARED}, ${perStream(late)} ms in the last ${WARM_COMPARED}`,
      `first token added ${signed(addedOf(early))} ms, then ${signed(addedOf(late))} ms (informative: not measured until warm)`,
    ]);
    const run = async (layout: string) => {
      // Connections on every side, and the layout's caches, after the re-pinning.
      await warm(4);
      for (const point of pointsOf(options.rounds)) {
        const m = await measure(
          agent,
          bursts!,
          origins,
          gateway!,
          quiet,
          setup.apiKey,
          point.clients,
          point.rounds,
          point.arrivals,
        );
        const { direct, relay: relayed, floor: bare, through, unstored } = m.firsts;
        const added = median(through) - median(direct);
        const relayAdded = median(relayed) - median(direct);
        const bareAdded = median(bare) - median(direct);
        const judged = layout === "pinned" && point.judged;
        // How far a difference of p50s could move on other rounds of the same machine.
        const interval = (side: Side, base: Side) =>
          bootstrapInterval(point.rounds, (drawn) => {
            const pooled = (of: Side) => drawn.flatMap((i) => m.byRound[of][i]!);
            return median(pooled(side)) - median(pooled(base));
          });
        const [low, high] = interval("through", "direct");
        const [bareLow, bareHigh] = interval("floor", "direct");
        const undecided = judged && low < 1 && high >= 1;
        // A C relay that only copies bytes is the least any process in the
        // path can add: when it alone adds 1 ms, no gateway can add less.
        // A bare Node proxy is the least a gateway in Node (as ours is) can
        // add; the verdict says so when that alone reached the target.
        const verdict = !judged
          ? ""
          : added < 1
            ? " PASS"
            : relayAdded >= 1
              ? ` MISS, below this run's floor: a C TCP relay alone adds ${signed(relayAdded)} ms`
              : bareAdded >= 1
                ? ` MISS; a bare Node proxy alone adds ${signed(bareAdded)} ms in this run`
                : " MISS";
        const name = `gateway ${layout}, ${point.name}`;
        const ms = (seconds: number) => (seconds * 1000).toFixed(2);
        rows.push([
          `${name}: first token`,
          `direct ${median(direct).toFixed(2)} ms, through ${median(through).toFixed(2)} ms; gateway CPU ${ms(m.cpuPerStream.through)} ms per whole stream` +
            (m.unquiet > 0 ? `; ${m.unquiet} sides began before their processes were quiet` : ""),
          `${signed(added)} ms (95% interval ${signed(low)} to ${signed(high)}; per round ${spread(m.perRound.added)})${verdict}${judged ? " (< 1 ms at p50)" : " (informative)"}${undecided ? "; the interval spans 1 ms: this run cannot tell" : ""}`,
        ]);
        rows.push([
          `${name}: the least any proxy adds`,
          `a C TCP relay (relay ${median(relayed).toFixed(2)} ms − direct) ${signed(relayAdded)} ms ${spread(m.perRound.relay)}`,
          "two loopback hops and a process wake-up, no HTTP (informative)",
        ]);
        rows.push([
          `${name}: split of the added time`,
          `hops + a bare Node proxy (floor ${median(bare).toFixed(2)} ms − direct) ${signed(bareAdded)} ms (95% interval ${signed(bareLow)} to ${signed(bareHigh)}) ${spread(m.perRound.hops)}`,
          `the gateway's own (through − floor) ${signed(median(through) - median(bare))} ms ${spread(m.perRound.own)}`,
        ]);
        rows.push([
          `${name}: the stored response's price`,
          `store: false: through ${median(unstored).toFixed(2)} ms, gateway CPU ${ms(m.cpuPerStream.unstored)} ms per whole stream`,
          `storing costs ${signed((m.cpuPerStream.through - m.cpuPerStream.unstored) * 1000)} ms CPU per stream (informative)`,
        ]);
      }
    };
    await run("shared");
    const pin = pinning();
    if (pin) {
      try {
        // The floors stand where the gateway stands; only one of them is busy
        // at a time. The clients stand there too, not beside the runtime: a
        // client sharing the runtime's core waits, for a token relayed a
        // fraction of a millisecond late, until the runtime's next decode
        // step gives the core up, which turned 0.1 ms into 1.8 ms for a
        // quarter of the first tokens (docs/streaming.md).
        pin.pin(gateway.pid, "0");
        pin.pin(floor.pid, "0");
        pin.pin(relay.pid, "0");
        pin.pin(process.pid, "0");
        pin.pin(bursts.pid, "0");
        pin.pin(runtime.pid, "1");
        await run("pinned");
      } finally {
        for (const pid of [gateway.pid, floor.pid, relay.pid, runtime.pid, process.pid, bursts.pid])
          pin.pin(pid, pin.original);
      }
    } else {
      rows.push(["gateway pinned", "not run: no taskset or fewer than two cores", ""]);
    }
  } finally {
    await agent.close();
    await gateway?.stop();
    await floor?.stop();
    await relay?.stop();
    await bursts?.stop();
    await runtime.stop();
    await rm(setup.dir, { recursive: true, force: true });
  }
  return rows;
}
