import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { V1Container, V1Pod, V1PodStatus } from "@kubernetes/client-node";
import type { Logger } from "../../../lib/logger.js";
import { nextFailureCount, restartDelayMs } from "./backoff.js";
import { resolveCommand } from "./container-command.js";
import {
  startContainerProcess,
  type ContainerProcess,
  type ExitInfo,
} from "./container-process.js";
import { podFolderName, sandboxNames, type SandboxNames } from "./names.js";
import { createSandbox, destroySandbox } from "./network.js";
import {
  apiTime,
  buildPodStatus,
  conditionMemoryFrom,
  restartPolicyOf,
  shouldRestart,
  type ConditionMemory,
  type ContainerFacts,
  type PodFacts,
  type Terminated,
} from "./pod-status.js";
import { startProber } from "./prober.js";

/**
 * Runs one pod: its sandbox, its init containers in order, then its
 * containers side by side, each restarted by the pod's policy; reports what
 * happens through the status subresource; and tears everything down on
 * terminate(). One worker per pod uid; the agent decides when to make and
 * end them.
 */
export interface WorkerDeps {
  nodeName: string;
  /** The node's address, the pods' gateway. */
  hostIP: string;
  repoRoot: string;
  stateDir: string;
  allocateIP(preferred: string | undefined): string | undefined;
  releaseIP(ip: string): void;
  /** Resolves false when the pod no longer exists. */
  writeStatus(pod: V1Pod, status: V1PodStatus): Promise<boolean>;
  deletePod(pod: V1Pod): Promise<void>;
  log: Logger;
}

/** Longest grace a stop waits before SIGKILL, whatever the pod asks. */
export const MAX_GRACE_SECONDS = 30;
const STATUS_RETRY_MS = 1_000;

interface Slot {
  spec: V1Container;
  facts: ContainerFacts;
  process?: ContainerProcess;
}

export class PodWorker {
  readonly uid: string;
  private pod: V1Pod;
  private readonly names: SandboxNames;
  private readonly folder: string;
  private readonly memory: ConditionMemory;
  private readonly log: Logger;
  private readonly init: Slot[];
  private readonly main: Slot[];
  private readonly abort = new AbortController();
  private podIP: string | undefined;
  private startTime = apiTime();
  private initialized = false;
  private initFailed = false;
  private running: Promise<void> | undefined;
  private terminating: Promise<void> | undefined;
  private statusGone = false;
  private writing: Promise<void> | undefined;
  private dirty = false;
  private lastWritten = "";

  constructor(
    pod: V1Pod,
    private readonly deps: WorkerDeps,
  ) {
    this.pod = pod;
    this.uid = pod.metadata!.uid!;
    const ns = pod.metadata!.namespace!;
    const name = pod.metadata!.name!;
    this.names = sandboxNames(deps.nodeName, this.uid);
    this.folder = join(deps.stateDir, "pods", podFolderName(ns, name, this.uid));
    this.memory = conditionMemoryFrom(pod);
    const previousStart = pod.status?.startTime as unknown;
    if (previousStart instanceof Date) this.startTime = apiTime(previousStart);
    else if (typeof previousStart === "string") this.startTime = previousStart;
    this.log = deps.log.child({ pod: `${ns}/${name}` });
    const previous = new Map(
      [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map(
        (s) => [s.name, s.restartCount],
      ),
    );
    const slot = (spec: V1Container): Slot => ({
      spec,
      facts: {
        name: spec.name,
        image: spec.image ?? "",
        phase: { kind: "waiting", reason: "PodInitializing" },
        // An agent restart recreates the sandbox; the counts carry on.
        restartCount: previous.get(spec.name) ?? 0,
        ready: false,
        started: false,
      },
    });
    this.init = (pod.spec?.initContainers ?? []).map(slot);
    this.main = (pod.spec?.containers ?? []).map(slot);
  }

  get key(): string {
    return `${this.pod.metadata?.namespace}/${this.pod.metadata?.name}`;
  }

  get netns(): string {
    return this.names.netns;
  }

  /** The newest object from the watch; the spec is read once, at start. */
  update(pod: V1Pod): void {
    this.pod = pod;
  }

  start(): void {
    this.running ??= this.run().catch((err: unknown) => {
      if (this.abort.signal.aborted) return;
      this.log.error({ err: (err as Error).message }, "pod failed to start");
    });
  }

  /**
   * Stops every process (SIGTERM, SIGKILL after the grace period), removes
   * the sandbox and the volumes, and with deleteObject deletes the pod
   * object, the kubelet's last word on a pod it has finished terminating.
   */
  terminate(options: { deleteObject: boolean; reason: string }): Promise<void> {
    this.terminating ??= this.doTerminate(options);
    return this.terminating;
  }

  private async doTerminate(options: { deleteObject: boolean; reason: string }): Promise<void> {
    const graceMs = this.graceSeconds() * 1000;
    this.log.info({ reason: options.reason, graceSeconds: graceMs / 1000 }, "stopping pod");
    this.abort.abort();
    const running = [...this.init, ...this.main].flatMap((slot) =>
      slot.process ? [slot.process] : [],
    );
    await Promise.all(running.map((proc) => proc.stop(graceMs)));
    await this.running;
    if (!options.deleteObject) await this.flushStatus();
    this.statusGone = true;
    await destroySandbox({ ...this.names, ...(this.podIP ? { podIP: this.podIP } : {}) });
    if (this.podIP) this.deps.releaseIP(this.podIP);
    await rm(join(this.folder, "volumes"), { recursive: true, force: true });
    this.log.info({ netns: this.names.netns }, "sandbox removed");
    if (options.deleteObject) {
      await this.deps.deletePod(this.pod);
      this.log.info("pod object deleted");
    }
  }

  private graceSeconds(): number {
    const asked =
      this.pod.metadata?.deletionGracePeriodSeconds ??
      this.pod.spec?.terminationGracePeriodSeconds ??
      30;
    return Math.min(Math.max(asked, 0), MAX_GRACE_SECONDS);
  }

  private async run(): Promise<void> {
    const phase = this.pod.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") return;
    this.publish();
    await this.createSandbox();
    if (this.abort.signal.aborted) return;
    for (const slot of this.main) slot.facts.phase = { kind: "waiting", reason: "PodInitializing" };
    for (const slot of this.init) {
      const ok = await this.runInit(slot);
      if (!ok) return;
    }
    this.initialized = true;
    this.log.info("initialized");
    this.publish();
    await Promise.all(this.main.map((slot) => this.supervise(slot)));
  }

  private async createSandbox(): Promise<void> {
    const preferred = this.pod.status?.podIP;
    const ip = this.deps.allocateIP(preferred);
    if (ip === undefined) throw new Error("no free address in the node's pod range");
    this.podIP = ip;
    await createSandbox({ ...this.names, podIP: ip, gateway: this.deps.hostIP });
    await mkdir(join(this.folder, "logs"), { recursive: true });
    for (const volume of this.pod.spec?.volumes ?? []) {
      if (volume.emptyDir) await mkdir(this.volumeDir(volume.name), { recursive: true });
    }
    this.log.info({ podIP: ip, netns: this.names.netns, folder: this.folder }, "sandbox ready");
    this.publish();
  }

  private volumeDir(name: string): string {
    return join(this.folder, "volumes", name);
  }

  /** Runs an init container until it succeeds; false when the pod must not go on. */
  private async runInit(slot: Slot): Promise<boolean> {
    let failures = 0;
    for (;;) {
      const { exit, ranForMs } = await this.runOnce(slot);
      if (this.abort.signal.aborted) return false;
      if (exit.exitCode === 0) return true;
      if (restartPolicyOf(this.pod) === "Never") {
        this.initFailed = true;
        this.publish();
        return false;
      }
      failures = nextFailureCount(failures, ranForMs);
      if (!(await this.backoff(slot, failures))) return false;
    }
  }

  /** Keeps a container running as the restart policy says, until the pod stops. */
  private async supervise(slot: Slot): Promise<void> {
    let failures = 0;
    for (;;) {
      const { exit, ranForMs } = await this.runOnce(slot);
      if (this.abort.signal.aborted) return;
      if (!shouldRestart(restartPolicyOf(this.pod), exit.exitCode)) return;
      failures = nextFailureCount(failures, ranForMs);
      if (!(await this.backoff(slot, failures))) return;
    }
  }

  /** Shows CrashLoopBackOff while waiting; false when the pod stopped meanwhile. */
  private async backoff(slot: Slot, failures: number): Promise<boolean> {
    const delay = restartDelayMs(failures);
    const last = slot.facts.phase.kind === "terminated" ? slot.facts.phase : undefined;
    if (last) slot.facts.lastTermination = last;
    slot.facts.phase = {
      kind: "waiting",
      reason: "CrashLoopBackOff",
      message: `back-off ${Math.round(delay / 1000)}s restarting failed container=${slot.spec.name} pod=${this.pod.metadata?.name}_${this.pod.metadata?.namespace}(${this.uid})`,
    };
    this.publish();
    try {
      await sleep(delay, undefined, { signal: this.abort.signal });
    } catch {
      return false;
    }
    slot.facts.restartCount++;
    return true;
  }

  /** One run of a container, from start to exit. */
  private async runOnce(slot: Slot): Promise<{ exit: ExitInfo; ranForMs: number }> {
    const { facts, spec } = slot;
    const startedAt = apiTime();
    const began = Date.now();
    let proc: ContainerProcess;
    try {
      const command = resolveCommand(this.pod, spec, {
        repoRoot: this.deps.repoRoot,
        nodeBinary: process.execPath,
        path: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
        podIP: this.podIP,
        volumeDirs: new Map(
          (this.pod.spec?.volumes ?? [])
            .filter((v) => v.emptyDir)
            .map((v) => [v.name, this.volumeDir(v.name)]),
        ),
        defaultCwd: this.folder,
      });
      proc = startContainerProcess(
        this.names.netns,
        command,
        join(this.folder, "logs", `${spec.name}.log`),
      );
    } catch (err) {
      const message = (err as Error).message;
      facts.phase = {
        kind: "terminated",
        exitCode: 128,
        reason: "StartError",
        message,
        startedAt,
        finishedAt: startedAt,
      };
      this.publish();
      return { exit: { exitCode: 128, error: message }, ranForMs: 0 };
    }
    slot.process = proc;
    const containerID = `modelgate-node-agent://${proc.pid}`;
    facts.containerID = containerID;
    facts.phase = { kind: "running", startedAt };
    const isInit = this.init.includes(slot);
    this.log.info(
      { container: spec.name, pid: proc.pid, restartCount: facts.restartCount },
      "container started",
    );
    const prober = isInit ? undefined : this.startProbes(slot);
    this.publish();
    // A stop that began before the process existed must still reach it.
    if (this.abort.signal.aborted) void proc.stop(this.graceSeconds() * 1000);
    const exit = await proc.exited;
    prober?.stop();
    slot.process = undefined;
    facts.ready = false;
    facts.started = false;
    const message =
      exit.error ??
      (exit.exitCode !== 0 && spec.terminationMessagePolicy === "FallbackToLogsOnError"
        ? proc.tail.text()
        : "");
    const terminated: Terminated = {
      kind: "terminated",
      exitCode: exit.exitCode,
      ...(exit.signal !== undefined ? { signal: exit.signal } : {}),
      reason: exit.error ? "StartError" : exit.exitCode === 0 ? "Completed" : "Error",
      ...(message ? { message } : {}),
      startedAt,
      finishedAt: apiTime(),
      containerID,
    };
    facts.phase = terminated;
    this.log.info(
      { container: spec.name, exitCode: exit.exitCode, signal: exit.signal },
      "container exited",
    );
    this.publish();
    return { exit, ranForMs: Date.now() - began };
  }

  private startProbes(slot: Slot): { stop(): void } {
    const { facts, spec } = slot;
    return startProber(spec, this.podIP!, {
      onStarted: () => {
        facts.started = true;
        this.publish();
      },
      onReadiness: (ready) => {
        if (facts.ready === ready) return;
        facts.ready = ready;
        this.log.info({ container: spec.name, ready }, "readiness changed");
        this.publish();
      },
      onUnhealthy: (probe, detail) => {
        this.log.warn(
          { container: spec.name, probe, detail },
          "probe failed, restarting container",
        );
        void slot.process?.stop(
          Math.min(this.pod.spec?.terminationGracePeriodSeconds ?? 30, MAX_GRACE_SECONDS) * 1000,
        );
      },
    });
  }

  private facts(): PodFacts {
    return {
      ...(this.podIP ? { podIP: this.podIP } : {}),
      hostIP: this.deps.hostIP,
      startTime: this.startTime,
      initContainers: this.init.map((s) => s.facts),
      containers: this.main.map((s) => s.facts),
      initialized: this.initialized,
      initFailed: this.initFailed,
    };
  }

  /** Schedules a status write; writes coalesce, and only a changed status is sent. */
  private publish(): void {
    if (this.statusGone) return;
    this.dirty = true;
    this.writing ??= this.writeLoop().finally(() => (this.writing = undefined));
  }

  private async flushStatus(): Promise<void> {
    this.publish();
    await this.writing;
  }

  private async writeLoop(): Promise<void> {
    while (this.dirty && !this.statusGone) {
      this.dirty = false;
      const status = buildPodStatus(this.pod, this.facts(), this.memory, apiTime());
      const text = JSON.stringify(status);
      if (text === this.lastWritten) continue;
      try {
        if (!(await this.deps.writeStatus(this.pod, status))) {
          this.statusGone = true;
          return;
        }
        this.lastWritten = text;
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, "status write failed, retrying");
        this.dirty = true;
        await sleep(STATUS_RETRY_MS);
      }
    }
  }
}
