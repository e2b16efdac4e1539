import {
  ApiException,
  CoordinationV1Api,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
} from "@kubernetes/client-node";
import type { Logger } from "../../lib/logger.js";

/**
 * Leader election on a coordination.k8s.io Lease, the protocol client-go's
 * leaderelection package and controller-runtime use, so two operator
 * replicas never both act:
 *
 * - a candidate takes the Lease when it is free, or when its record has not
 *   changed for a whole leaseDuration as measured on the candidate's own
 *   clock (never by comparing clocks across machines);
 * - every write carries the resourceVersion last read, so of two candidates
 *   racing for an expired Lease exactly one wins (the other gets 409);
 * - the leader renews every retryPeriod and steps down if it could not renew
 *   for renewDeadline, which is shorter than leaseDuration, so it stops
 *   acting before anyone else may start;
 * - on a clean shutdown it hands the Lease back at once.
 */
export interface LeaseElectionOptions {
  kc: KubeConfig;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  logger: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

export interface LeaseElection {
  isLeader(): boolean;
  /** Stops campaigning; a leader releases the Lease. */
  stop(): Promise<void>;
}

export function startLeaseElection(options: LeaseElectionOptions): LeaseElection {
  const api = options.kc.makeApiClient(CoordinationV1Api);
  const { namespace, name, identity, logger } = options;
  let leader = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let lastRenew = 0;
  /** The record as last read, and when (local monotonic clock) it last changed. */
  let observed: { key: string; at: number } | undefined;

  const micro = () => new V1MicroTime();

  async function tryAcquireOrRenew(): Promise<boolean> {
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 404)) throw err;
      await api.createNamespacedLease({
        namespace,
        body: {
          metadata: { name, namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: Math.ceil(options.leaseDurationMs / 1000),
            acquireTime: micro(),
            renewTime: micro(),
            leaseTransitions: 0,
          },
        },
      });
      return true;
    }
    const spec = lease.spec ?? {};
    const recordKey = `${spec.holderIdentity ?? ""}|${String(spec.renewTime ?? "")}`;
    const nowMs = performance.now();
    if (observed?.key !== recordKey) observed = { key: recordKey, at: nowMs };
    const holder = spec.holderIdentity ?? "";
    const mine = holder === identity;
    const durationMs = (spec.leaseDurationSeconds ?? 0) * 1000;
    const expired = holder === "" || nowMs - observed.at > durationMs;
    if (!mine && !expired) return false;

    const transitions = (spec.leaseTransitions ?? 0) + (mine ? 0 : 1);
    await api.replaceNamespacedLease({
      name,
      namespace,
      body: {
        ...lease,
        spec: {
          ...spec,
          holderIdentity: identity,
          leaseDurationSeconds: Math.ceil(options.leaseDurationMs / 1000),
          acquireTime: mine ? spec.acquireTime : micro(),
          renewTime: micro(),
          leaseTransitions: transitions,
        },
      },
    });
    return true;
  }

  async function tick(): Promise<void> {
    if (stopped) return;
    let ok = false;
    try {
      ok = await tryAcquireOrRenew();
    } catch (err) {
      // A 409 means another candidate wrote first; anything else is an API
      // server we cannot reach. Either way this round did not renew.
      if (!(err instanceof ApiException && err.code === 409)) {
        logger.warn({ lease: `${namespace}/${name}`, err: String(err) }, "lease update failed");
      }
    }
    if (stopped) return;
    const now = performance.now();
    if (ok) {
      lastRenew = now;
      if (!leader) {
        leader = true;
        logger.info({ lease: `${namespace}/${name}`, identity }, "became leader");
        options.onStartedLeading();
      }
    } else if (leader && now - lastRenew > options.renewDeadlineMs) {
      leader = false;
      logger.error({ lease: `${namespace}/${name}` }, "lost the lease; stopping");
      options.onStoppedLeading();
      return;
    }
    timer = setTimeout(() => void tick(), options.retryPeriodMs);
  }

  void tick();

  return {
    isLeader: () => leader,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (!leader) return;
      leader = false;
      try {
        const lease = await api.readNamespacedLease({ name, namespace });
        if (lease.spec?.holderIdentity !== identity) return;
        await api.replaceNamespacedLease({
          name,
          namespace,
          body: {
            ...lease,
            spec: {
              ...lease.spec,
              holderIdentity: "",
              leaseDurationSeconds: 1,
              renewTime: micro(),
            },
          },
        });
        logger.info({ lease: `${namespace}/${name}` }, "released the lease");
      } catch (err) {
        logger.warn({ err: String(err) }, "cannot release the lease; it expires on its own");
      }
    },
  };
}
