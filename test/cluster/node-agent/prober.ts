import { request } from "node:http";
import type { V1Container, V1Probe } from "@kubernetes/client-node";
import { isHttpProbe } from "./unsupported.js";
import {
  initialProbeState,
  observeProbe,
  probeTiming,
  type ProbeResult,
  type ProbeState,
} from "./probe-state.js";

/**
 * The probes of one container run: startup first (it gates the others),
 * then liveness and readiness side by side, each on its own period, until
 * stop(). Decisions come from probe-state.ts; this only times and sends
 * requests. Only httpGet is implemented; any other handler counts as
 * success, which unsupported.ts reports.
 */
export interface ProbeEvents {
  /** The startup probe succeeded, or there is none. */
  onStarted(): void;
  onReadiness(ready: boolean): void;
  /** Startup or liveness failed: the container must be restarted. */
  onUnhealthy(probe: "startup" | "liveness", detail: string): void;
}

export interface Prober {
  stop(): void;
}

export function startProber(container: V1Container, podIP: string, events: ProbeEvents): Prober {
  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  const startedAt = Date.now();

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });

  /** Runs a probe until stopped or until `until` says its result settles it. */
  async function loop(
    probe: V1Probe,
    initial: ProbeResult,
    onResult: (state: ProbeState, detail: string) => "continue" | "done",
  ): Promise<void> {
    const timing = probeTiming(probe);
    const delay = Math.max(0, startedAt + timing.initialDelayMs - Date.now());
    if (delay > 0) await sleep(delay);
    let state = initialProbeState(initial);
    while (!stopped) {
      const { ok, detail } = await runProbe(probe, container, podIP, timing.timeoutMs);
      if (stopped) return;
      state = observeProbe(state, ok, timing);
      if (onResult(state, detail) === "done") return;
      await sleep(timing.periodMs);
    }
  }

  async function run(): Promise<void> {
    if (container.startupProbe) {
      let healthy = false;
      await loop(container.startupProbe, "unknown", (state, detail) => {
        if (state.result === "success") {
          healthy = true;
          return "done";
        }
        if (state.result === "failure") {
          events.onUnhealthy("startup", detail);
          return "done";
        }
        return "continue";
      });
      if (!healthy || stopped) return;
    }
    events.onStarted();
    const readiness = container.readinessProbe;
    const liveness = container.livenessProbe;
    if (!readiness) events.onReadiness(true);
    const loops: Promise<void>[] = [];
    if (readiness) {
      let last: boolean | undefined;
      loops.push(
        loop(readiness, "failure", (state) => {
          const ready = state.result === "success";
          if (ready !== last) events.onReadiness(ready);
          last = ready;
          return "continue";
        }),
      );
    }
    if (liveness) {
      loops.push(
        loop(liveness, "unknown", (state, detail) => {
          if (state.result !== "failure") return "continue";
          events.onUnhealthy("liveness", detail);
          return "done";
        }),
      );
    }
    await Promise.all(loops);
  }

  void run();
  return {
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}

async function runProbe(
  probe: V1Probe,
  container: V1Container,
  podIP: string,
  timeoutMs: number,
): Promise<{ ok: boolean; detail: string }> {
  if (!isHttpProbe(probe)) return { ok: true, detail: "not an httpGet probe" };
  const get = probe.httpGet!;
  const port = resolvePort(get.port, container);
  if (port === undefined)
    return { ok: false, detail: `no container port named ${String(get.port)}` };
  const path = get.path ?? "/";
  const headers: Record<string, string> = { "user-agent": "kube-probe/modelgate-node-agent" };
  for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
  return httpGet(get.host ?? podIP, port, path, headers, timeoutMs);
}

export function resolvePort(port: number | string, container: V1Container): number | undefined {
  if (typeof port === "number") return port;
  if (/^\d+$/.test(port)) return Number(port);
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

/** The kubelet's rule: any status from 200 to 399 is a success. */
function httpGet(
  host: string,
  port: number,
  path: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<{ ok: boolean; detail: string }> {
  return new Promise((resolve) => {
    const req = request(
      { host, port, path, method: "GET", headers, agent: false, timeout: timeoutMs },
      (res) => {
        res.resume();
        const code = res.statusCode ?? 0;
        resolve({
          ok: code >= 200 && code < 400,
          detail: `HTTP probe failed with statuscode: ${code}`,
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on("error", (err) =>
      resolve({ ok: false, detail: `Get http://${host}:${port}${path}: ${err.message}` }),
    );
    req.end();
  });
}
