import { setTimeout as sleep } from "node:timers/promises";
import { FetchError, isFetchError } from "./errors.js";
import { isTransientNetworkError } from "./http-client.js";

export interface RetryPolicy {
  /** Total tries, the first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, baseDelayMs: 500, maxDelayMs: 8_000 };

/**
 * Delay before try number `attempt + 1` (attempt counts from 1): exponential
 * with "full jitter", so many init containers that failed together do not
 * come back together. Pure: the random draw is passed in.
 */
export function backoffDelay(policy: RetryPolicy, attempt: number, random: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (ceiling / 2) * random);
}

/** Whether another try can help: coded errors say so, bare ones are judged by their code. */
export function isRetryable(err: unknown): boolean {
  if (isFetchError(err)) return err.retryable;
  return isTransientNetworkError(err);
}

export interface RetryHooks {
  signal?: AbortSignal | undefined;
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
}

/**
 * Runs `task` until it succeeds, fails with an error retrying cannot fix, or
 * runs out of attempts. `task` gets the attempt number so it can resume from
 * where the previous one stopped.
 */
export async function withRetry<T>(
  task: (attempt: number) => Promise<T>,
  policy: RetryPolicy,
  hooks: RetryHooks = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await task(attempt);
    } catch (err) {
      if (hooks.signal?.aborted) throw abortedError(hooks.signal);
      if (!isRetryable(err) || attempt >= policy.attempts) throw finalError(err, attempt);
      const delay = backoffDelay(policy, attempt, Math.random());
      hooks.onRetry?.(err, attempt, delay);
      await sleep(delay, undefined, { signal: hooks.signal }).catch(() => {
        throw abortedError(hooks.signal);
      });
    }
  }
}

export function abortedError(signal: AbortSignal | undefined): FetchError {
  return new FetchError("fetch_aborted", "fetch aborted; partial files are kept for a resume", {
    cause: signal?.reason,
  });
}

/** The error to surface once retrying stops: coded, and saying how often it was tried. */
function finalError(err: unknown, attempts: number): FetchError {
  const tries = attempts > 1 ? ` (after ${attempts} attempts)` : "";
  if (isFetchError(err)) {
    if (!tries) return err;
    return new FetchError(err.code, `${err.message}${tries}`, {
      status: err.status,
      retryable: err.retryable,
      cause: err.cause,
    });
  }
  const reason = err instanceof Error ? err.message : String(err);
  return new FetchError("download_failed", `${reason}${tries}`, { cause: err });
}
