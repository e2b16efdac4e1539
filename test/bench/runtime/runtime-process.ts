import { spawn, type ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { statCpuSeconds } from "../support/proc-stat.js";
import type { ThroughputOptions } from "../../../runtime/model-service.js";
import type { LoadOptions } from "../../../runtime/model/load-model.js";

/** What runtime-child.ts is told, as one JSON argument. */
export interface ChildConfig {
  path: string;
  modelId: string;
  threads: number;
  throughput: Partial<ThroughputOptions>;
  /** The ONNX file and task, for a folder whose defaults the loader cannot infer. */
  load?: Pick<LoadOptions, "onnxFile" | "task">;
}

export interface RuntimeProcess {
  url: string;
  pid: number;
  /** User plus system CPU seconds the child has used so far (Linux /proc), or NaN. */
  cpuSeconds(): Promise<number>;
  /** Resident memory now and at its peak (Linux /proc), in MiB, or NaN. */
  memory(): Promise<Memory>;
  stop(): Promise<void>;
}

export interface Memory {
  rssMb: number;
  /** VmHWM: the high-water mark of resident memory since the process started. */
  peakMb: number;
}

const CHILD_SCRIPT = fileURLToPath(new URL("./runtime-child.ts", import.meta.url));
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

/**
 * Starts the runtime in a child Node process and waits for its ready line.
 * `nodeFlags` is for `--cpu-prof` and the like.
 */
export async function startRuntimeProcess(
  config: ChildConfig,
  nodeFlags: readonly string[] = [],
): Promise<RuntimeProcess> {
  return startServerProcess(CHILD_SCRIPT, JSON.stringify(config), nodeFlags);
}

/**
 * Any benchmark server script that speaks runtime-child.ts' protocol: one
 * JSON argument in, one `{"url": ...}` line out when ready, SIGTERM or a
 * closed stdin to stop (the entity-extraction benchmark's peer server).
 */
export async function startServerProcess(
  script: string,
  argument: string,
  nodeFlags: readonly string[] = [],
): Promise<RuntimeProcess> {
  const child = spawn(process.execPath, [...nodeFlags, "--import", "tsx", script, argument], {
    stdio: ["pipe", "pipe", "inherit"],
    cwd: process.cwd(),
  });
  const url = await readyUrl(child);
  const pid = child.pid!;
  return {
    url,
    pid,
    cpuSeconds: () => processCpuSeconds(pid),
    memory: () => processMemory(pid),
    stop: () => stopChild(child),
  };
}

function readyUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server child not ready within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server child exited with ${code} before it was ready`));
    });
    child.stdout!.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      const newline = buffered.indexOf("\n");
      if (newline < 0) return;
      clearTimeout(timer);
      try {
        resolve((JSON.parse(buffered.slice(0, newline)) as { url: string }).url);
      } catch (error) {
        reject(new Error(`server child printed ${buffered.slice(0, 200)}`, { cause: error }));
      }
    });
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** utime + stime from /proc/<pid>/stat, in seconds; clock ticks are 100 Hz on Linux. */
export function processCpuSeconds(pid: number): Promise<number> {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/** VmRSS and VmHWM from /proc/<pid>/status, which gives them in kB. */
export async function processMemory(pid: number): Promise<Memory> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) =>
      Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
    return { rssMb: kb("VmRSS") / 1024, peakMb: kb("VmHWM") / 1024 };
  } catch {
    return { rssMb: Number.NaN, peakMb: Number.NaN };
  }
}
