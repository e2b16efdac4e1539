import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { constants } from "node:os";
import type { ResolvedCommand } from "./container-command.js";
import { LogTail } from "./log-tail.js";

/**
 * One run of one container: a process inside the pod's network namespace
 * (`ip netns exec` joins it and then execs the command, so the pid we hold
 * is the command's own), in a process group of its own so that a stop
 * reaches whatever it forked. stdout and stderr go to one log file, appended
 * across restarts as `kubectl logs` would show them.
 */
export interface ExitInfo {
  exitCode: number;
  signal?: number;
  /** The spawn itself failed (no such program, ...). */
  error?: string;
}

export interface ContainerProcess {
  pid: number;
  exited: Promise<ExitInfo>;
  tail: LogTail;
  /** SIGTERM the group, SIGKILL it after graceMs; resolves once it has exited. */
  stop(graceMs: number): Promise<ExitInfo>;
  signal(sig: NodeJS.Signals): void;
}

export function startContainerProcess(
  netns: string,
  command: ResolvedCommand,
  logFile: string,
): ContainerProcess {
  const log = createWriteStream(logFile, { flags: "a" });
  const tail = new LogTail();
  const child = spawn("ip", ["netns", "exec", netns, command.file, ...command.args], {
    cwd: command.cwd,
    env: command.env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      log.write(chunk);
      tail.push(chunk);
    });
  }
  const exited = new Promise<ExitInfo>((resolve) => {
    // A spawn failure emits "error" and never "exit".
    child.on("error", (err) => {
      tail.push(`${err.message}\n`);
      resolve({ exitCode: 127, error: err.message });
    });
    child.on("exit", (code, signal) => {
      // The container ends with its main process, as in a runtime: whatever
      // it left running in its group goes with it.
      signalGroup("SIGKILL");
      if (signal) {
        const number = constants.signals[signal];
        resolve({ exitCode: 128 + number, signal: number });
      } else {
        resolve({ exitCode: code ?? 128 });
      }
    });
  });
  child.on("close", () => log.end());
  function signalGroup(sig: NodeJS.Signals): void {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      // Already gone.
    }
  }
  return {
    pid: child.pid ?? -1,
    exited,
    tail,
    signal: signalGroup,
    async stop(graceMs) {
      signalGroup("SIGTERM");
      const timer = setTimeout(() => signalGroup("SIGKILL"), graceMs);
      const info = await exited;
      clearTimeout(timer);
      return info;
    },
  };
}
