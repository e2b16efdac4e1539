import type { Redis } from "iovalkey";
import type { RateLimits } from "../rate-limit/limits.js";
import type { BucketState, BucketTake, LimitDecision, Limiter } from "../rate-limit/limiter.js";

/**
 * Token buckets in Valkey, shared by every replica: one hash per bucket
 * (`v` the balance, `t` when it was computed), read, refilled, checked and
 * taken by one Lua script, so two replicas can never both spend the last
 * unit. The clock is the server's (`TIME`): replicas whose clocks disagree
 * still refill a bucket at one rate. A bucket expires once it would be full
 * again, so idle identities cost no memory.
 *
 * One script call carries every settlement and every decision this process
 * asked for in one turn of the event loop (see `ValkeyLimiter`): the
 * settlements first, then the decisions in the order they were asked, each
 * all-or-nothing over its own buckets and seeing what the decisions before
 * it took. The script is atomic, so the shared limits stay exact.
 *
 * The arithmetic is the in-process bucket's (token-bucket.ts): the same
 * refill, the same all-or-nothing take, the same `Retry-After` rounding.
 *
 * A decision's bucket may also ask for a lease (`want`, leased-limiter.ts):
 * units this replica takes ahead and spends without asking again. The
 * lease never changes the decision (ok iff every bucket has room for its
 * cost); once it is ok, each bucket gives min(want, whole units left after
 * the cost), and nothing when it is refused.
 *
 * KEYS: the settled buckets, then every decision's buckets in order.
 * ARGV: settlement count S, decision count D; per settlement rate, burst,
 * delta; per decision its bucket count, then per bucket rate, burst, cost,
 * want. Returns per decision: ok, wait in ms, then per bucket remaining
 * (after the cost and the lease), ms to full, units leased.
 */
const BATCH_SCRIPT = `
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local function balance(key, rate, burst)
  local held = redis.call('HMGET', key, 'v', 't')
  local v = tonumber(held[1])
  local t = tonumber(held[2])
  if v == nil or t == nil then
    v = burst
  elseif now > t then
    v = v + (now - t) * rate
  end
  if v > burst then v = burst end
  return v
end
local settlements = tonumber(ARGV[1])
local decisions = tonumber(ARGV[2])
local a = 3
local k = 1
for s = 1, settlements do
  local rate = tonumber(ARGV[a]) / 60000
  local burst = tonumber(ARGV[a + 1])
  local delta = tonumber(ARGV[a + 2])
  a = a + 3
  local v = balance(KEYS[k], rate, burst) - delta
  if v > burst then v = burst end
  local to_full = math.ceil((burst - v) / rate)
  if to_full <= 0 then
    redis.call('DEL', KEYS[k])
  else
    redis.call('HSET', KEYS[k], 'v', tostring(v), 't', tostring(now))
    redis.call('PEXPIRE', KEYS[k], to_full + 1000)
  end
  k = k + 1
end
local out = {}
for d = 1, decisions do
  local n = tonumber(ARGV[a])
  a = a + 1
  local balances = {}
  local wait_ms = 0
  for i = 1, n do
    local rate = tonumber(ARGV[a + 4 * i - 4]) / 60000
    local burst = tonumber(ARGV[a + 4 * i - 3])
    local cost = tonumber(ARGV[a + 4 * i - 2])
    local v = balance(KEYS[k + i - 1], rate, burst)
    balances[i] = v
    if v < cost then
      local missing = math.min(cost, burst) - v
      local ms = missing / rate
      if ms > wait_ms then wait_ms = ms end
    end
  end
  local ok = 1
  if wait_ms > 0 then ok = 0 end
  out[#out + 1] = tostring(ok)
  out[#out + 1] = tostring(wait_ms)
  for i = 1, n do
    local rate = tonumber(ARGV[a + 4 * i - 4]) / 60000
    local burst = tonumber(ARGV[a + 4 * i - 3])
    local cost = tonumber(ARGV[a + 4 * i - 2])
    local want = tonumber(ARGV[a + 4 * i - 1])
    local key = KEYS[k + i - 1]
    local v = balances[i]
    local granted = 0
    if ok == 1 then
      v = v - cost
      if want > 0 and v >= 1 then granted = math.min(want, math.floor(v)) end
      v = v - granted
    end
    local to_full = math.ceil((burst - v) / rate)
    if to_full < 0 then to_full = 0 end
    if ok == 1 and cost + granted ~= 0 then
      redis.call('HSET', key, 'v', tostring(v), 't', tostring(now))
      redis.call('PEXPIRE', key, to_full + 1000)
    end
    out[#out + 1] = tostring(math.floor(math.max(v, 0)))
    out[#out + 1] = tostring(to_full)
    out[#out + 1] = tostring(granted)
  end
  a = a + 4 * n
  k = k + n
end
return out
`;

export const RATE_LIMIT_KEY_PREFIX = "modelgate:rl:";

/**
 * Most decisions and settlements in one script call: the script blocks
 * Valkey while it runs (about a microsecond a bucket), so a flood of
 * requests in one turn is split rather than holding every other client up.
 */
export const MAX_BATCH = 128;

type BatchCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<string[]>;

/** A shared decision, and per bucket the whole units leased with it (all 0 when none was asked). */
export interface LeasingDecision {
  readonly decision: LimitDecision;
  readonly granted: readonly number[];
}

interface PendingTake {
  readonly takes: readonly BucketTake[];
  /** Per bucket the units to lease on top of the cost; null for none. */
  readonly wants: readonly number[] | null;
  resolve(decision: LeasingDecision): void;
  reject(error: unknown): void;
}

interface PendingSettle {
  readonly id: string;
  readonly limits: RateLimits;
  readonly delta: number;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * The Valkey limiter. Takes and settlements are queued and sent when the
 * event loop's poll phase is over (`setImmediate`), as one script call per
 * turn: the requests whose hooks ran in one turn share one round trip, one
 * write and one reply. Measured: under load one round trip per request was
 * the gateway's largest cost after the ledger, and iovalkey's own
 * auto-pipelining, which flushes on `process.nextTick`, never merged two
 * requests (each request's hooks run in a callback of their own). A
 * request waits for nothing more than the rest of the turn it was in.
 */
export class ValkeyLimiter implements Limiter {
  private readonly batchCommand: BatchCommand;
  private takes: PendingTake[] = [];
  private settles: PendingSettle[] = [];
  private scheduled = false;

  constructor(client: Redis) {
    // defineCommand sends EVALSHA and loads the script on NOSCRIPT (a restarted server).
    client.defineCommand("modelgateLimits", { lua: BATCH_SCRIPT });
    const commands = client as unknown as { modelgateLimits: BatchCommand };
    this.batchCommand = commands.modelgateLimits.bind(client);
  }

  take(takes: readonly BucketTake[]): Promise<LimitDecision> {
    return this.takeLeasing(takes, null).then((leasing) => leasing.decision);
  }

  /**
   * A take that also asks, per bucket, for `wants[i]` units ahead (a lease):
   * granted only when the take is ok, and only from what is left after it.
   */
  takeLeasing(
    takes: readonly BucketTake[],
    wants: readonly number[] | null,
  ): Promise<LeasingDecision> {
    return new Promise((resolve, reject) => {
      this.takes.push({ takes, wants, resolve, reject });
      this.schedule();
    });
  }

  settle(id: string, limits: RateLimits, delta: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.settles.push({ id, limits, delta, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.takes.length > 0 || this.settles.length > 0) {
      const settles = this.settles.splice(0, MAX_BATCH);
      const takes = this.takes.splice(0, MAX_BATCH - settles.length);
      this.send(settles, takes);
    }
  }

  private send(settles: readonly PendingSettle[], takes: readonly PendingTake[]): void {
    const keys: string[] = [];
    const args: string[] = [String(settles.length), String(takes.length)];
    for (const settle of settles) {
      keys.push(RATE_LIMIT_KEY_PREFIX + settle.id);
      args.push(
        String(settle.limits.requestsPerMinute),
        String(settle.limits.burst),
        String(settle.delta),
      );
    }
    for (const { takes: buckets, wants } of takes) {
      args.push(String(buckets.length));
      buckets.forEach((take, i) => {
        keys.push(RATE_LIMIT_KEY_PREFIX + take.id);
        args.push(
          String(take.limits.requestsPerMinute),
          String(take.limits.burst),
          String(take.cost),
          String(wants?.[i] ?? 0),
        );
      });
    }
    this.batchCommand(keys.length, ...keys, ...args).then(
      (out) => {
        for (const settle of settles) settle.resolve();
        let at = 0;
        for (const pending of takes) {
          pending.resolve(decisionOf(pending.takes, out, at));
          at += 2 + 3 * pending.takes.length;
        }
      },
      (error: unknown) => {
        for (const settle of settles) settle.reject(error);
        for (const pending of takes) pending.reject(error);
      },
    );
  }
}

/** One decision's part of the script's answer, from index `at`. */
function decisionOf(
  takes: readonly BucketTake[],
  out: readonly string[],
  at: number,
): LeasingDecision {
  const states: BucketState[] = takes.map((take, i) => ({
    limit: take.limits.burst,
    remaining: Number(out[at + 2 + 3 * i]),
    resetMs: Number(out[at + 3 + 3 * i]),
  }));
  const granted = takes.map((_take, i) => Number(out[at + 4 + 3 * i]));
  if (out[at] === "1") return { decision: { ok: true, states }, granted };
  // Whole seconds, at least 1, as the in-process bucket rounds.
  const retryAfterSeconds = Math.max(1, Math.ceil(Number(out[at + 1]) / 1000 - 1e-9));
  return { decision: { ok: false, retryAfterSeconds, states }, granted };
}
