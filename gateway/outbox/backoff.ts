export interface RetryPolicy {
  /** Delay after the first failure. */
  baseDelayMs: number;
  /** Cap on any one delay. */
  maxDelayMs: number;
  /**
   * Attempts before a record is parked in the dead-letter file. Leave it unset
   * for records that must never be given up on (billing): they are then retried
   * until the receiver answers.
   */
  maxAttempts?: number;
}

/**
 * Exponential backoff with "equal jitter": half the delay is fixed, half
 * random. The fixed half keeps a floor, so a down receiver is not hammered;
 * the random half spreads the retries of many gateway replicas apart. Pure:
 * `random` is injected. `failures` counts from 1.
 */
export function backoffDelayMs(
  failures: number,
  policy: RetryPolicy,
  random: () => number,
): number {
  const exponent = Math.min(Math.max(failures, 1) - 1, 30);
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** exponent);
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** True when a record has used up its attempts. */
export function attemptsExhausted(attempts: number, policy: RetryPolicy): boolean {
  return policy.maxAttempts !== undefined && attempts >= policy.maxAttempts;
}
