// `npm run bench:gateway [-- --quick] [-- --profile] [-- --log-level L] [-- --valkey] [-- --postgres]`:
// requests per second and p50/p99 latency through the gateway against the
// same runtime called directly, at 1, 16 and 64 clients. Two runtimes: a
// stand-in that answers at once (the gateway's own cost; the targets apply)
// and the real runtime on tiny-nli. Each layout runs with all processes
// sharing the cores, then pinned (gateway alone on core 0) when taskset
// exists; the payment route is measured once, informatively. Runtime,
// gateway, sink and provider are child processes; the load generator is
// this one. A miss is reported, not turned into an exit code.
import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { generateFixtures } from "../../fixtures/generate.js";
import type { Child } from "./child-process.js";
import type { LoadRequest } from "../support/closed-loop.js";
import { compareSuite, type ComparePoint, type Suite } from "./compare.js";
import { pinning, type Pinning } from "./cpu-affinity.js";
import { writeGatewayFiles, type GatewaySetup } from "./gateway-files.js";
import { measurePay, PAY_REQUESTS_PER_RUN, payRequests, type PayPoint } from "./pay-route.js";
import { planFrom } from "./plan.js";
import * as start from "./processes.js";
import { profileLines } from "./profile.js";
import { BARE_PROXY_SUITE, renderReport, TARGET_SUITE } from "./report.js";
import { startRun } from "../support/run-clock.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { processCpuSeconds } from "./child-process.js";
import { startDatabaseServer } from "./database-server.js";
import { measureCpuSplit, type CpuSplit } from "./cpu-split.js";

const plan = planFrom(process.argv.slice(2));
const { log, elapsedSeconds } = startRun(plan.deadlineMs);

const pin = pinning();
log(
  `modelgate gateway benchmark (${plan.quick ? "quick" : "full"}): node ${process.version}, ` +
    `${availableParallelism()} cores, taskset ${pin ? `yes (affinity ${pin.original})` : "no"}, ` +
    `gateway log level ${plan.logLevel}`,
);
const nliPath = (await generateFixtures(undefined, (line) => log(`fixtures: ${line}`)))["tiny-nli"];
if (!nliPath) throw new Error("the fixture generator gave no tiny-nli");

/** Short input, one label: the least work a real runtime can be asked for. */
const bodyFor = (model: string) =>
  JSON.stringify({ model, input: "It rained all day.", categories: ["weather"] });
const apiRequests = (model: string, apiKey: string): LoadRequest[] => [
  {
    path: "/v1/responses",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: bodyFor(model),
  },
];

/** Gateway, sink and store servers on core 0; runtime and this process (the client) on core 1. */
async function pinnedRun(p: Pinning, suite: Suite): Promise<ComparePoint[]> {
  const rounds = suite.name.startsWith(TARGET_SUITE) ? plan.targetRows : plan.rows;
  const all = [suite.gateway, ...suite.others, suite.runtime];
  // A server of several processes (PostgreSQL) moves with all of them; the
  // backends it forks later inherit the postmaster's affinity.
  const pidsOf = async (child: Child) => (child.pids ? await child.pids() : [child.pid]);
  const pinAll = async (child: Child, cpus: string) => {
    for (const pid of await pidsOf(child)) p.pin(pid, cpus);
  };
  try {
    for (const child of [suite.gateway, ...suite.others]) await pinAll(child, "0");
    p.pin(suite.runtime.pid, "1");
    p.pin(process.pid, "1");
    const points = await compareSuite(plan, suite, "pinned", rounds, log);
    if (suite.name.startsWith(TARGET_SUITE) && suite.name !== BARE_PROXY_SUITE) {
      const split = await measureCpuSplit(plan, suite);
      if (split) {
        splits.set(suite.name, split);
        log(
          `${suite.name} pinned cpu split: ${split.totalMs.toFixed(3)} ms/request over ${split.requests} requests`,
        );
      }
    }
    return points;
  } finally {
    for (const child of all) await pinAll(child, p.original);
    p.pin(process.pid, p.original);
  }
}

async function usageCount(sink: Child): Promise<number | null> {
  try {
    const response = await fetch(`${sink.url}/count`, { signal: AbortSignal.timeout(2_000) });
    return ((await response.json()) as { count: number }).count;
  } catch {
    return null;
  }
}

/**
 * The throwaway redis-server of `--valkey`, watched as the suite's "valkey"
 * process: its CPU share and CPU per request are reported beside the
 * gateway's.
 */
function valkeyChild(server: RedisServer): Child {
  const pid = server.pid;
  if (pid === null) throw new Error("redis-server is not running");
  return {
    name: "valkey",
    url: server.url,
    pid,
    cpuSeconds: () => processCpuSeconds(pid),
    stop: () => server.close(),
  };
}

/**
 * The suite again through a second gateway (same runtime, same sink) on
 * shared stores: with `--valkey`, its limits and used signatures in a fresh
 * redis-server; with `--postgres`, also its ledger on a fresh PostgreSQL
 * server (`--database-url`) instead of the embedded PGlite, as several
 * replicas are deployed. The servers are watched beside the gateway.
 */
async function storesSuite(
  suite: Suite,
  setup: GatewaySetup,
  stores: { postgres: boolean },
): Promise<void> {
  const servers: Child[] = [];
  const flags = { ...setup.flags };
  if (stores.postgres) {
    const database = await startDatabaseServer();
    servers.push(database);
    running.push(database);
    flags.databaseUrl = database.url;
  }
  const server = await startRedisServer();
  const valkey = valkeyChild(server);
  servers.push(valkey);
  running.push(valkey);
  flags.valkeyUrl = server.url;
  const gateway = await start.startGateway({ ...setup, flags }, null);
  running.unshift(gateway);
  const name = `${suite.name}${stores.postgres ? "+postgres" : ""}+valkey`;
  log(
    `${name} suite: gateway ${gateway.url} on ${servers.map((s) => s.url.replace(/\/\/[^@]*@/, "//")).join(", ")} ready`,
  );
  const withStores: Suite = { ...suite, name, gateway, others: [...suite.others, ...servers] };
  points.push(...(await compareSuite(plan, withStores, "shared", plan.rows, log)));
  if (pin) points.push(...(await pinnedRun(pin, withStores)));
  await gateway.stop();
  running.splice(running.indexOf(gateway), 1);
  for (const child of servers) {
    await child.stop();
    running.splice(running.indexOf(child), 1);
  }
}

/** The runs `--valkey` and `--postgres` add to a suite. */
async function sharedStoreSuites(suite: Suite, setup: GatewaySetup): Promise<void> {
  if (plan.valkey) await storesSuite(suite, setup, { postgres: false });
  if (plan.postgres) await storesSuite(suite, setup, { postgres: true });
}

const loadBefore = loadavg()[0]!;
const points: ComparePoint[] = [];
/** By suite: where its gateway's CPU went at the throughput target's load (cpu-split.ts). */
const splits = new Map<string, CpuSplit>();
let pay: PayPoint[] = [];
let usageRecords: number | null = null;
const profileDir = plan.profile ? await mkdtemp(join(tmpdir(), "modelgate-bench-gw-prof-")) : null;
const running: Child[] = [];
const folders: string[] = [];
try {
  // 1. The stand-in runtime: the gateway's own cost, and the payment route.
  const [runtime, sink, provider] = await Promise.all([
    start.startStandInRuntime(),
    start.startUsageSink(),
    start.startPaymentProvider(),
  ]);
  running.push(runtime, sink, provider);
  const setup = await writeGatewayFiles({
    model: "stand-in",
    runtimeUrl: runtime.url,
    sinkUrl: `${sink.url}/usage`,
    providerUrl: provider.url,
    logLevel: plan.logLevel,
  });
  folders.push(setup.dir);
  const gateway = await start.startGateway(setup, profileDir);
  running.unshift(gateway);
  log(`stand-in suite: runtime ${runtime.url}, gateway ${gateway.url}, sink, provider ready`);
  const standIn: Suite = {
    name: "stand-in",
    runtime,
    gateway,
    others: [sink],
    requests: apiRequests("stand-in", setup.apiKey),
  };
  points.push(...(await compareSuite(plan, standIn, "shared", plan.rows, log)));
  if (pin) points.push(...(await pinnedRun(pin, standIn)));
  pay = await measurePay(
    plan,
    gateway,
    [runtime, gateway, sink, provider],
    payRequests(bodyFor("stand-in"), setup, (1 + plan.payClients.length) * PAY_REQUESTS_PER_RUN),
    log,
  );
  usageRecords = await usageCount(sink);
  await sharedStoreSuites(standIn, setup);
  // The gateway first, so it never sees its runtime, sink or provider go.
  for (const child of running.splice(0)) await child.stop();

  // 2. The real runtime on tiny-nli, informative.
  const [nli, nliSink] = await Promise.all([
    start.startModelRuntime(plan, nliPath, "tiny-nli"),
    start.startUsageSink(),
  ]);
  running.push(nli, nliSink);
  const nliSetup = await writeGatewayFiles({
    model: "tiny-nli",
    runtimeUrl: nli.url,
    sinkUrl: `${nliSink.url}/usage`,
    providerUrl: null,
    logLevel: plan.logLevel,
  });
  folders.push(nliSetup.dir);
  const nliGateway = await start.startGateway(nliSetup, null);
  running.unshift(nliGateway);
  log(`tiny-nli suite: runtime ${nli.url}, gateway ${nliGateway.url} ready`);
  const real: Suite = {
    name: "tiny-nli",
    runtime: nli,
    gateway: nliGateway,
    others: [nliSink],
    requests: apiRequests("tiny-nli", nliSetup.apiKey),
  };
  points.push(...(await compareSuite(plan, real, "shared", plan.rows, log)));
  if (pin) points.push(...(await pinnedRun(pin, real)));
  await sharedStoreSuites(real, nliSetup);
  // 3. The floor: a bare Node proxy in front of the same runtime, pinned as
  // the gateway is, measured with the target rows' rounds.
  if (pin) {
    const proxy = await start.startBareProxy(nli.url);
    running.unshift(proxy);
    log(`${BARE_PROXY_SUITE} suite: proxy ${proxy.url} ready`);
    points.push(
      ...(await pinnedRun(pin, { ...real, name: BARE_PROXY_SUITE, gateway: proxy, others: [] })),
    );
    await proxy.stop();
    running.splice(running.indexOf(proxy), 1);
  }
} finally {
  for (const child of running.splice(0)) await child.stop();
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
}

const load = { before: loadBefore, after: loadavg()[0]! };
log(`done in ${elapsedSeconds().toFixed(0)} s`);
const report = renderReport(points, pay, {
  load,
  pinned: pin !== null,
  logLevel: plan.logLevel,
  usageRecords,
  splits,
});
if (profileDir) report.push("", ...(await profileLines(profileDir)));
process.stdout.write(`\n${report.join("\n")}\n`);
