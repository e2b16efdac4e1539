import type { Counter } from "prom-client";
import { sameLimits, type RateLimits } from "../rate-limit/limits.js";
import type { BucketState, BucketTake, LimitDecision, Limiter } from "../rate-limit/limiter.js";
import type { ValkeyLimiter } from "./valkey-limiter.js";

/**
 * Leased units: this replica takes a bounded chunk of a shared bucket ahead
 * and spends it without a round trip to Valkey. A take whose every bucket
 * holds enough leased units here is decided locally; any other goes to
 * Valkey as before (ok iff every bucket has room for its cost there) and
 * asks, on top, for the lease to be topped up to one chunk from what is
 * left after the cost.
 *
 * The chunk is floor(5% of the bucket's burst / replicas); 0 or 1 means no
 * lease, exactly the shared limiter's behaviour. Every unit spent here was
 * taken from the shared bucket first, so the replicas together never admit
 * more than the shared limit; at most one chunk per replica (5% of the
 * burst in all) sits in leases unspent, so they admit at least 95% of it.
 * A lease idle for `idleMs`, and every lease at shutdown, goes back to
 * Valkey (a negative settlement in the batched script); a replica killed
 * outright loses its leases (the callers get less, never more), and a
 * replica that loses Valkey drops them (`drop`) for the fallback's share.
 */
export const LEASE_SHARE = 0.05;

/**
 * A lease unused this long goes back. One second is long beside the gaps
 * between the requests of any caller whose limit gives leases (a burst of
 * 20 × replicas or more), so a caller that keeps sending keeps its lease;
 * and short beside the minute the limits are stated in, so an idle replica
 * does not hold units the others could admit. Tying it to the time a chunk
 * takes to refill would hold the units of a slow bucket (one a minute) for
 * minutes.
 */
export const DEFAULT_LEASE_IDLE_MS = 1_000;

/** Whole units of a bucket one replica may hold ahead: 0 or 1 means none. */
export function leaseChunk(limits: RateLimits, replicas: number): number {
  return Math.floor((LEASE_SHARE * limits.burst) / Math.max(1, replicas));
}

interface Lease {
  readonly limits: RateLimits;
  readonly chunk: number;
  /** Units taken from the shared bucket and not yet spent here. */
  units: number;
  /** Units asked for by a call whose answer is not in: counted against the chunk. */
  pending: number;
  /** The shared bucket's whole units left when Valkey last answered for it, and when (-1: not yet). */
  shared: number;
  reportedAt: number;
  usedAt: number;
}

export interface LeasedLimiterOptions {
  shared: ValkeyLimiter;
  /** Replicas sharing the buckets: the chunk is split across them. */
  replicas: number;
  /** Decisions taken here from a lease, and those that went to Valkey. */
  decisions: Counter<"decided">;
  idleMs?: number;
  now?: () => number;
}

export class LeasedLimiter implements Limiter {
  private readonly leases = new Map<string, Lease>();
  private readonly shared: ValkeyLimiter;
  private readonly replicas: number;
  private readonly idleMs: number;
  private readonly now: () => number;
  private readonly leased: { inc(): void };
  private readonly sharedCalls: { inc(): void };
  private sweeper: NodeJS.Timeout | null = null;

  constructor(options: LeasedLimiterOptions) {
    this.shared = options.shared;
    this.replicas = options.replicas;
    this.idleMs = options.idleMs ?? DEFAULT_LEASE_IDLE_MS;
    this.now = options.now ?? Date.now;
    this.leased = options.decisions.labels("leased");
    this.sharedCalls = options.decisions.labels("shared");
  }

  take(takes: readonly BucketTake[]): Promise<LimitDecision> {
    const now = this.now();
    const local = this.takeLocally(takes, now);
    if (local) {
      this.leased.inc();
      return Promise.resolve(local);
    }
    this.sharedCalls.inc();
    return this.takeShared(takes, now);
  }

  /**
   * A settlement goes into the lease when one is held: a give-back up to
   * the chunk (the rest to Valkey, so a lease never grows past it), a debt
   * when the lease covers it. Otherwise to Valkey as without leases.
   */
  settle(id: string, limits: RateLimits, delta: number): Promise<void> {
    const lease = this.leases.get(id);
    if (lease && sameLimits(lease.limits, limits)) {
      if (delta <= 0) {
        const kept = Math.min(-delta, Math.max(0, lease.chunk - lease.units - lease.pending));
        lease.units += kept;
        if (kept === -delta) return Promise.resolve();
        return this.shared.settle(id, limits, delta + kept);
      }
      if (lease.units >= delta) {
        lease.units -= delta;
        return Promise.resolve();
      }
    }
    return this.shared.settle(id, limits, delta);
  }

  /** Forgets every lease (Valkey is away: the fallback's share decides); their units are lost, not admitted. */
  drop(): void {
    if (this.leases.size === 0) return;
    this.leases.clear();
    this.stopSweeping();
  }

  /** Units held in leases now (for tests and a gauge). */
  get heldUnits(): number {
    let units = 0;
    for (const lease of this.leases.values()) units += lease.units;
    return units;
  }

  /** Gives every lease back to Valkey (shutdown): one batched script call. */
  async close(): Promise<void> {
    this.stopSweeping();
    const returns: Array<Promise<void>> = [];
    for (const [id, lease] of this.leases) {
      if (lease.units > 0) returns.push(this.shared.settle(id, lease.limits, -lease.units));
    }
    this.leases.clear();
    await Promise.allSettled(returns);
  }

  /** Gives back the leases unused for `idleMs`; returns how many. */
  returnIdle(): number {
    const now = this.now();
    let returned = 0;
    for (const [id, lease] of this.leases) {
      if (lease.pending > 0 || now - lease.usedAt < this.idleMs) continue;
      this.leases.delete(id);
      returned += 1;
      // Best effort: a give-back Valkey never got leaves the bucket stricter until it refills.
      if (lease.units > 0) this.shared.settle(id, lease.limits, -lease.units).catch(() => {});
    }
    if (this.leases.size === 0) this.stopSweeping();
    return returned;
  }

  /** The decision from the leases alone, or null when one bucket's lease does not cover its cost. */
  private takeLocally(takes: readonly BucketTake[], now: number): LimitDecision | null {
    for (const take of takes) {
      const lease = this.leases.get(take.id);
      if (!lease || lease.units < take.cost || lease.reportedAt < 0) return null;
      if (!sameLimits(lease.limits, take.limits)) return null;
    }
    const states = takes.map((take) => {
      const lease = this.leases.get(take.id)!;
      lease.units -= take.cost;
      lease.usedAt = now;
      return estimate(lease, now);
    });
    return { ok: true, states };
  }

  private takeShared(takes: readonly BucketTake[], now: number): Promise<LimitDecision> {
    let wants: number[] | null = null;
    const leases: Array<Lease | null> = takes.map((take, i) => {
      const chunk = leaseChunk(take.limits, this.replicas);
      if (chunk <= 1) return null;
      const lease = this.leaseOf(take, chunk, now);
      const want = Math.max(0, chunk - lease.units - lease.pending);
      lease.pending += want;
      (wants ??= takes.map(() => 0))[i] = want;
      return lease;
    });
    if (wants === null) return this.shared.take(takes);
    const asked: number[] = wants;
    return this.shared.takeLeasing(takes, asked).then(
      ({ decision, granted }) => {
        const answered = this.now();
        const states = decision.states.map((state, i): BucketState => {
          const lease = leases[i];
          if (!lease) return state;
          lease.pending -= asked[i]!;
          lease.shared = state.remaining;
          lease.reportedAt = answered;
          lease.usedAt = answered;
          const units = granted[i]!;
          if (this.leases.get(takes[i]!.id) === lease) {
            lease.units += units;
          } else if (units > 0) {
            // Dropped or replaced while the call was out: the units go back.
            this.shared.settle(takes[i]!.id, lease.limits, -units).catch(() => {});
          }
          return estimate(lease, answered);
        });
        return decision.ok
          ? { ok: true, states }
          : { ok: false, retryAfterSeconds: decision.retryAfterSeconds, states };
      },
      (error: unknown) => {
        leases.forEach((lease, i) => {
          if (lease) lease.pending -= asked[i]!;
        });
        throw error;
      },
    );
  }

  /** The bucket's lease, made if there is none; one with other limits (a reload) goes back first. */
  private leaseOf(take: BucketTake, chunk: number, now: number): Lease {
    const held = this.leases.get(take.id);
    if (held && sameLimits(held.limits, take.limits)) return held;
    if (held && held.units > 0) {
      this.shared.settle(take.id, held.limits, -held.units).catch(() => {});
    }
    const lease: Lease = {
      limits: take.limits,
      chunk,
      units: 0,
      pending: 0,
      shared: take.limits.burst,
      reportedAt: -1,
      usedAt: now,
    };
    this.leases.set(take.id, lease);
    this.startSweeping();
    return lease;
  }

  private startSweeping(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.returnIdle(), Math.max(10, this.idleMs / 2));
    this.sweeper.unref();
  }

  private stopSweeping(): void {
    if (!this.sweeper) return;
    clearInterval(this.sweeper);
    this.sweeper = null;
  }
}

/**
 * What the `x-ratelimit-*` headers say of a leased bucket: what Valkey last
 * said was left in the shared bucket, refilled since at the bucket's rate,
 * plus what is still leased here. An estimate: the other replicas' takes
 * since and their leases are not in it.
 */
function estimate(lease: Lease, now: number): BucketState {
  const { burst, requestsPerMinute } = lease.limits;
  const perMs = requestsPerMinute / 60_000;
  const refilled = Math.min(burst, lease.shared + Math.max(0, now - lease.reportedAt) * perMs);
  const left = Math.min(burst, refilled + lease.units);
  return {
    limit: burst,
    remaining: Math.max(0, Math.floor(left)),
    resetMs: left >= burst ? 0 : Math.ceil((burst - left) / perMs),
  };
}
