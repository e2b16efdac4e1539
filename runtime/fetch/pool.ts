/**
 * Runs `task` over `items` with at most `limit` in flight, results in input
 * order. The first failure is reported through `onFailure` (which aborts the
 * others) and rethrown once every running task has settled, so no file is
 * still being written when the caller sees the error.
 */
export async function runPool<T, R>(
  items: readonly T[],
  limit: number,
  signal: AbortSignal | undefined,
  task: (item: T) => Promise<R>,
  onFailure: () => void,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && !signal?.aborted && next < items.length) {
      const index = next++;
      try {
        results[index] = await task(items[index] as T);
      } catch (error) {
        if (failure === undefined) {
          failure = { error };
          onFailure();
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
  return results;
}
