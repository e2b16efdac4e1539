import { spawn, type ChildProcess } from "node:child_process";
import { statCpuSeconds } from "../support/proc-stat.js";

/**
 * Every server of the benchmark (gateway, runtimes, sink, payment provider)
 * runs as a child Node process, so that the load generator in the parent
 * never shares an event loop with what it measures and each process's CPU
 * time can be read on its own from /proc.
 *
 * A child says it is ready in one of two ways. Our own child scripts send
 * `{ url }` over the IPC channel, which leaves their stdout free: the gateway
 * writes its request logs there, and sending them to /dev/null keeps their
 * cost in the gateway without making the parent read them. The payment
 * provider's own main.ts prints its URL as the first stdout line.
 */
export interface Child {
  name: string;
  url: string;
  pid: number;
  /** User plus system CPU seconds used so far, all threads (Linux /proc), or NaN. */
  cpuSeconds(): Promise<number>;
  /** Every process, for a server of several (PostgreSQL); else just `pid`. */
  pids?(): Promise<number[]>;
  /**
   * Our IPC children: sends `message` and resolves with the child's next
   * message (gateway-child.ts answers `{ profile: ... }` requests).
   */
  ask?(message: object): Promise<unknown>;
  stop(): Promise<void>;
}

export interface ChildOptions {
  name: string;
  script: string;
  /** `script` is a native program, run as it is, not a Node script. */
  native?: boolean;
  args?: readonly string[];
  /** Before the script: `--cpu-prof` and the like. */
  nodeFlags?: readonly string[];
  ready: "ipc" | "stdout-line";
}

const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;

export async function startChild(options: ChildOptions): Promise<Child> {
  const ipc = options.ready === "ipc";
  const args = options.args ?? [];
  const child = spawn(
    options.native ? options.script : process.execPath,
    options.native
      ? args
      : [...(options.nodeFlags ?? []), "--import", "tsx", options.script, ...args],
    // An IPC child exits when the channel closes, so it cannot outlive us.
    { stdio: ipc ? ["ignore", "ignore", "inherit", "ipc"] : ["pipe", "pipe", "inherit"] },
  );
  // Also for the provider, which watches neither stdin nor an IPC channel:
  // a run that ends early (its watchdog) takes its children with it.
  const reap = () => child.kill("SIGKILL");
  process.once("exit", reap);
  child.once("exit", () => process.off("exit", reap));
  const url = await waitReady(child, options);
  return {
    name: options.name,
    url,
    pid: child.pid!,
    cpuSeconds: () => processCpuSeconds(child.pid!),
    stop: () => stopChild(child),
    ...(ipc ? { ask: (message: object) => ask(child, message) } : {}),
  };
}

const ASK_TIMEOUT_MS = 10_000;

function ask(child: ChildProcess, message: object): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off("message", onMessage);
      reject(new Error(`no answer to ${JSON.stringify(message)} within ${ASK_TIMEOUT_MS} ms`));
    }, ASK_TIMEOUT_MS);
    const onMessage = (answer: unknown) => {
      clearTimeout(timer);
      resolve(answer);
    };
    child.once("message", onMessage);
    child.send(message);
  });
}

function waitReady(child: ChildProcess, options: ChildOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${options.name} not ready within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    const done = (url: string) => {
      clearTimeout(timer);
      resolve(url);
    };
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${options.name} exited (${code ?? signal}) before it was ready`));
    });
    if (options.ready === "ipc") {
      child.once("message", (message) => done((message as { url: string }).url));
      return;
    }
    let buffered = "";
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      const newline = buffered.indexOf("\n");
      if (newline < 0) return;
      // Keep draining what else it prints, so a full pipe never blocks it.
      child.stdout!.off("data", onData);
      child.stdout!.resume();
      done(buffered.slice(0, newline).trim());
    };
    child.stdout!.on("data", onData);
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
export async function processCpuSeconds(pid: number): Promise<number> {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/** The same for one thread: `/proc/<pid>/task/<pid>` is the main thread. */
export function threadCpuSeconds(pid: number, tid: number): Promise<number> {
  return statCpuSeconds(`/proc/${pid}/task/${tid}/stat`);
}
