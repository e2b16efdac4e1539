import type { Redis } from "iovalkey";
import type { RateLimits } from "../rate-limit/limits.js";
import type { BucketState, BucketTake, LimitDecision, Limiter } from "../rate-limit/limiter.js";

/**
 * Token buckets in Valkey, shared by every replica: one hash per bucket
 * (`v` the balance, `t` when it was computed), read, refilled, checked and
 * taken by one Lua script per decision, so two replicas can never both
 * spend the last unit. The clock is the server's (`TIME`): replicas whose
 * clocks disagree still refill a bucket at one rate. A bucket expires once
 * it would be full again, so idle identities cost no memory.
 *
 * The arithmetic is the in-process bucket's (token-bucket.ts): the same
 * refill, the same all-or-nothing take, the same `Retry-After` rounding.
 */
const TAKE_SCRIPT = `
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local n = #KEYS
local balances = {}
local wait_ms = 0
for i = 1, n do
  local rate = tonumber(ARGV[3 * i - 2]) / 60000
  local burst = tonumber(ARGV[3 * i - 1])
  local cost = tonumber(ARGV[3 * i])
  local held = redis.call('HMGET', KEYS[i], 'v', 't')
  local v = tonumber(held[1])
  local t = tonumber(held[2])
  if v == nil or t == nil then
    v = burst
  elseif now > t then
    v = v + (now - t) * rate
  end
  if v > burst then v = burst end
  balances[i] = v
  if v < cost then
    local missing = math.min(cost, burst) - v
    local ms = missing / rate
    if ms > wait_ms then wait_ms = ms end
  end
end
local ok = 1
if wait_ms > 0 then ok = 0 end
local out = { tostring(ok), tostring(wait_ms) }
for i = 1, n do
  local rate = tonumber(ARGV[3 * i - 2]) / 60000
  local burst = tonumber(ARGV[3 * i - 1])
  local cost = tonumber(ARGV[3 * i])
  local v = balances[i]
  if ok == 1 then v = v - cost end
  local to_full = math.ceil((burst - v) / rate)
  if to_full < 0 then to_full = 0 end
  if ok == 1 and cost ~= 0 then
    redis.call('HSET', KEYS[i], 'v', tostring(v), 't', tostring(now))
    redis.call('PEXPIRE', KEYS[i], to_full + 1000)
  end
  out[#out + 1] = tostring(math.floor(math.max(v, 0)))
  out[#out + 1] = tostring(to_full)
end
return out
`;

/** A settlement: `delta` more units taken (or given back when negative), capped at the burst. */
const SETTLE_SCRIPT = `
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local rate = tonumber(ARGV[1]) / 60000
local burst = tonumber(ARGV[2])
local delta = tonumber(ARGV[3])
local held = redis.call('HMGET', KEYS[1], 'v', 't')
local v = tonumber(held[1])
local t = tonumber(held[2])
if v == nil or t == nil then
  v = burst
elseif now > t then
  v = v + (now - t) * rate
end
v = v - delta
if v > burst then v = burst end
local to_full = math.ceil((burst - v) / rate)
if to_full <= 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'v', tostring(v), 't', tostring(now))
  redis.call('PEXPIRE', KEYS[1], to_full + 1000)
end
return 1
`;

export const RATE_LIMIT_KEY_PREFIX = "modelgate:rl:";

type TakeCommand = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<string[]>;
type SettleCommand = (key: string, ...args: string[]) => Promise<number>;

export class ValkeyLimiter implements Limiter {
  private readonly takeCommand: TakeCommand;
  private readonly settleCommand: SettleCommand;

  constructor(client: Redis) {
    // defineCommand sends EVALSHA and loads the script on NOSCRIPT (a restarted server).
    client.defineCommand("modelgateTake", { lua: TAKE_SCRIPT });
    client.defineCommand("modelgateSettle", { lua: SETTLE_SCRIPT, numberOfKeys: 1 });
    const commands = client as unknown as {
      modelgateTake: TakeCommand;
      modelgateSettle: SettleCommand;
    };
    this.takeCommand = commands.modelgateTake.bind(client);
    this.settleCommand = commands.modelgateSettle.bind(client);
  }

  async take(takes: readonly BucketTake[]): Promise<LimitDecision> {
    const keys = takes.map((take) => RATE_LIMIT_KEY_PREFIX + take.id);
    const args = takes.flatMap((take) => [
      String(take.limits.requestsPerMinute),
      String(take.limits.burst),
      String(take.cost),
    ]);
    const out = await this.takeCommand(keys.length, ...keys, ...args);
    const states: BucketState[] = takes.map((take, i) => ({
      limit: take.limits.burst,
      remaining: Number(out[2 + 2 * i]),
      resetMs: Number(out[3 + 2 * i]),
    }));
    if (out[0] === "1") return { ok: true, states };
    // Whole seconds, at least 1, as the in-process bucket rounds.
    const retryAfterSeconds = Math.max(1, Math.ceil(Number(out[1]) / 1000 - 1e-9));
    return { ok: false, retryAfterSeconds, states };
  }

  async settle(id: string, limits: RateLimits, delta: number): Promise<void> {
    await this.settleCommand(
      RATE_LIMIT_KEY_PREFIX + id,
      String(limits.requestsPerMinute),
      String(limits.burst),
      String(delta),
    );
  }
}
