import { isStoreUnreachable, StoreUnreachableError } from "./store-unreachable.js";

/**
 * A caller's store call that must not wait on a database that does not
 * answer. A hung server (every process stopped, its port still accepting)
 * holds a call for the pool's connect or query timeout, 10 and 30 s, and a
 * client waiting on it is one that cannot retry; so the call is refused at
 * once while the store is known down, given up after `timeoutMs`, and a
 * call that found the database not answering marks it down, so that the
 * next calls do not wait either. Both refusals are StoreUnreachableError:
 * a 503 with Retry-After at the error edge (app.ts).
 *
 * Giving up does not stop the work: a write may still land later. Only
 * work whose late landing changes nothing a caller relies on may be given
 * a deadline.
 */
/** How long a caller's read may wait before it is a 503: stored responses, Files, Batches. */
export const DEFAULT_READ_TIMEOUT_MS = 5000;

export interface StoreState {
  /** True while the database is known down: the call is refused without asking it. */
  down?: () => boolean;
  /** The call found the database unreachable or not answering: down until it answers again. */
  unreachable?: (error: unknown) => void;
}

export interface Deadline extends StoreState {
  /** The longest the call may wait; without it, as long as the pool's own timeouts. */
  timeoutMs?: number;
  /** What the refusal leaves undone, for its message: "not read", "response not stored". */
  undone: string;
}

export async function answerWithin<T>(work: () => Promise<T>, deadline: Deadline): Promise<T> {
  if (deadline.down?.()) throw new StoreUnreachableError(`store down: ${deadline.undone}`);
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = work();
    if (deadline.timeoutMs === undefined) return await answer;
    // Given up on, the work's own failure comes later and is nobody's to handle.
    answer.catch(() => undefined);
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new StoreUnreachableError(`store did not answer in time: ${deadline.undone}`)),
        deadline.timeoutMs,
      );
    });
    return await Promise.race([answer, late]);
  } catch (error) {
    if (isStoreUnreachable(error)) deadline.unreachable?.(error);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
