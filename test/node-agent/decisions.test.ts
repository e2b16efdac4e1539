import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { restartDelayMs, nextFailureCount, MAX_BACKOFF_MS } from "../cluster/node-agent/backoff.js";
import { allocateAddress, gatewayOf, parseCidr } from "../cluster/node-agent/cidr.js";
import { resolveCommand, rewritePaths } from "../cluster/node-agent/container-command.js";
import { sandboxNames, hostVethOfNetns, netnsPrefixOf } from "../cluster/node-agent/names.js";
import { initialProbeState, observeProbe, probeTiming } from "../cluster/node-agent/probe-state.js";
import { podPhase, type ContainerFacts, type PodFacts } from "../cluster/node-agent/pod-status.js";

/** The node agent's pure decisions, without a cluster. */
describe("pod addresses", () => {
  const cidr = parseCidr("10.250.3.0/29");

  it("never hands out the network address, the gateway or the broadcast address", () => {
    const used = new Set<string>();
    const got: string[] = [];
    for (;;) {
      const ip = allocateAddress(cidr, used);
      if (ip === undefined) break;
      used.add(ip);
      got.push(ip);
    }
    expect(gatewayOf(cidr)).toBe("10.250.3.1");
    expect(got).toEqual(["10.250.3.2", "10.250.3.3", "10.250.3.4", "10.250.3.5", "10.250.3.6"]);
  });

  it("keeps a pod's earlier address when it is free and valid", () => {
    expect(allocateAddress(cidr, new Set(), "10.250.3.5")).toBe("10.250.3.5");
    expect(allocateAddress(cidr, new Set(["10.250.3.5"]), "10.250.3.5")).toBe("10.250.3.2");
    expect(allocateAddress(cidr, new Set(), "10.250.3.1")).toBe("10.250.3.2");
    expect(allocateAddress(cidr, new Set(), "10.0.0.7")).toBe("10.250.3.2");
  });

  it("rejects ranges with host bits", () => {
    expect(() => parseCidr("10.250.3.4/24")).toThrow(/host bits/);
  });
});

describe("sandbox names", () => {
  it("fit interface-name limits and let a restarted agent find its own namespaces", () => {
    const names = sandboxNames("modelgate-real-0", "0b6c3f2e-1111-4222-8333-944445555666");
    expect(names.hostVeth.length).toBeLessThanOrEqual(15);
    expect(names.netns.startsWith(netnsPrefixOf("modelgate-real-0"))).toBe(true);
    expect(names.netns.startsWith(netnsPrefixOf("modelgate-real-1"))).toBe(false);
    expect(hostVethOfNetns(names.netns)).toBe(names.hostVeth);
  });
});

describe("container commands", () => {
  const mounts = [
    { mountPath: "/models", hostDir: "/state/volumes/models" },
    { mountPath: "/tmp", hostDir: "/state/volumes/tmp" },
  ];

  it("rewrites mount paths in flags, lists and shell scripts only where a path starts", () => {
    expect(rewritePaths("--dest=/models/tiny", mounts)).toBe("--dest=/state/volumes/models/tiny");
    expect(rewritePaths("/models", mounts)).toBe("/state/volumes/models");
    expect(rewritePaths("echo x > /tmp/a; ls '/models'", mounts)).toBe(
      "echo x > /state/volumes/tmp/a; ls '/state/volumes/models'",
    );
    expect(rewritePaths("/modelsfoo http://h/models", mounts)).toBe("/modelsfoo http://h/models");
  });

  it("maps modelgate to this checkout under tsx, with a clean environment", () => {
    const pod: V1Pod = {
      metadata: { name: "p", namespace: "ns" },
      spec: {
        volumes: [{ name: "tmp", emptyDir: {} }],
        containers: [
          {
            name: "c",
            command: ["modelgate"],
            args: ["runtime", "serve", "--x=$(NAME)"],
            env: [
              { name: "NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              { name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
            ],
            volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
          },
        ],
      },
    };
    const resolved = resolveCommand(pod, pod.spec!.containers[0]!, {
      repoRoot: "/repo",
      nodeBinary: "/usr/bin/node",
      path: "/usr/bin",
      podIP: "10.250.0.2",
      volumeDirs: new Map([["tmp", "/state/tmp"]]),
      defaultCwd: "/state",
    });
    expect(resolved).toEqual({
      file: "/usr/bin/node",
      args: ["--import", "tsx", "/repo/cli/modelgate.ts", "runtime", "serve", "--x=p"],
      cwd: "/repo",
      env: {
        PATH: "/usr/bin",
        HOSTNAME: "p",
        HOME: "/root",
        TMPDIR: "/state/tmp",
        NAME: "p",
        IP: "10.250.0.2",
      },
    });
  });
});

describe("probes", () => {
  it("flip only after the thresholds", () => {
    const timing = probeTiming({ successThreshold: 2, failureThreshold: 3 });
    let state = initialProbeState("failure");
    state = observeProbe(state, true, timing);
    expect(state.result).toBe("failure");
    state = observeProbe(state, true, timing);
    expect(state.result).toBe("success");
    state = observeProbe(observeProbe(state, false, timing), false, timing);
    expect(state.result).toBe("success");
    expect(observeProbe(state, false, timing).result).toBe("failure");
  });

  it("use the kubelet's defaults", () => {
    expect(probeTiming({})).toEqual({
      initialDelayMs: 0,
      periodMs: 10_000,
      timeoutMs: 1_000,
      successThreshold: 1,
      failureThreshold: 3,
    });
  });
});

describe("restart backoff", () => {
  it("doubles up to a cap and resets after a long run", () => {
    expect([1, 2, 3].map(restartDelayMs)).toEqual([1000, 2000, 4000]);
    expect(restartDelayMs(20)).toBe(MAX_BACKOFF_MS);
    expect(nextFailureCount(5, 1_000)).toBe(6);
    expect(nextFailureCount(5, 120_000)).toBe(1);
  });
});

describe("pod phase", () => {
  const container = (
    phase: ContainerFacts["phase"],
    extra: Partial<ContainerFacts> = {},
  ): ContainerFacts => ({
    name: "c",
    image: "",
    phase,
    restartCount: 0,
    ready: false,
    started: false,
    ...extra,
  });
  const facts = (containers: ContainerFacts[], more: Partial<PodFacts> = {}): PodFacts => ({
    hostIP: "10.250.0.1",
    startTime: "2026-01-01T00:00:00Z",
    initContainers: [],
    containers,
    initialized: true,
    initFailed: false,
    ...more,
  });
  const done = (exitCode: number): ContainerFacts["phase"] => ({
    kind: "terminated",
    exitCode,
    reason: exitCode ? "Error" : "Completed",
    startedAt: "x",
    finishedAt: "y",
  });

  it("follows the kubelet's rules", () => {
    expect(
      podPhase(
        facts([container({ kind: "waiting", reason: "PodInitializing" })], { initialized: false }),
        "Always",
      ),
    ).toBe("Pending");
    expect(podPhase(facts([container({ kind: "running", startedAt: "x" })]), "Always")).toBe(
      "Running",
    );
    expect(podPhase(facts([container(done(1))]), "Always")).toBe("Running");
    expect(podPhase(facts([container(done(0))]), "Never")).toBe("Succeeded");
    expect(podPhase(facts([container(done(2))]), "Never")).toBe("Failed");
    expect(podPhase(facts([], { initFailed: true, initialized: false }), "Never")).toBe("Failed");
  });
});
