import { fileURLToPath } from "node:url";
import { startRuntimeProcess } from "../runtime/runtime-process.js";
import { startChild, type Child } from "./child-process.js";
import type { GatewaySetup } from "./gateway-files.js";
import type { GatewayBenchPlan } from "./plan.js";

/** How each process of the benchmark is started; run.ts decides when. */
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

export function startStandInRuntime(): Promise<Child> {
  return startChild({ name: "runtime", script: here("./stand-in-runtime.ts"), ready: "ipc" });
}

/** The floor row's bare Node proxy in front of `runtimeUrl` (bare-proxy.ts). */
export function startBareProxy(runtimeUrl: string): Promise<Child> {
  return startChild({
    name: "gateway",
    script: here("./bare-proxy.ts"),
    args: [runtimeUrl, "whole"],
    ready: "ipc",
  });
}

export function startUsageSink(): Promise<Child> {
  return startChild({ name: "sink", script: here("./usage-sink.ts"), ready: "ipc" });
}

/** The fixture's own main.ts, with an allowance no run can spend. */
export function startPaymentProvider(): Promise<Child> {
  return startChild({
    name: "provider",
    script: here("../../fixtures/payment-provider/main.ts"),
    args: ["--allowance", String(Number.MAX_SAFE_INTEGER)],
    ready: "stdout-line",
  });
}

export function startGateway(setup: GatewaySetup, profileDir: string | null): Promise<Child> {
  return startChild({
    name: "gateway",
    script: here("./gateway-child.ts"),
    args: [JSON.stringify(setup.flags)],
    nodeFlags: profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : [],
    ready: "ipc",
  });
}

/** The runtime benchmark's child: runtime/main.ts's wiring on a real model, logs off. */
export async function startModelRuntime(
  plan: GatewayBenchPlan,
  path: string,
  modelId: string,
): Promise<Child> {
  const runtime = await startRuntimeProcess({
    path,
    modelId,
    // One thread: the model is tiny, and the pinned variant gives it one core.
    threads: 1,
    throughput: plan.runtimeThroughput,
  });
  return { name: "runtime", ...runtime };
}
