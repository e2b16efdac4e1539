import type { TensorData } from "../engine/session.js";

/** ES2024's ArrayBuffer methods (Node 22+), which the project's TypeScript `lib` does not declare. */
interface Detachable {
  readonly detached: boolean;
  transfer(length?: number): ArrayBuffer;
}

/**
 * Frees a run's outputs now instead of at V8's next full collection.
 *
 * onnxruntime-node hands every output back in a fresh ArrayBuffer, the KV
 * cache's present outputs included even when they are bound to the past
 * buffers (for SmolLM2 about 6 MB a decode step, unused). V8 counts that
 * memory as external and frees it only when a mark-compact finds the buffers
 * dead; at some MB a step it started a full mark-compact of the whole heap
 * every ten or so steps (five or six per 64-token request), whose concurrent
 * marking competed with onnxruntime's threads for the cores.
 * `ArrayBuffer.prototype.transfer(0)` detaches a buffer and releases its
 * memory at once, so the external memory never builds up.
 *
 * Only buffers nobody else holds may go: `keep` lists the caller's own
 * buffers (fed or bound), which are never released even if the binding were
 * ever to hand them back as they are.
 */
export function releaseOutputs(
  outputs: Readonly<Record<string, TensorData>>,
  keep: Readonly<Record<string, TensorData>>,
): void {
  releaseBuffers(
    Object.values(outputs).map((tensor) => tensor.data),
    Object.values(keep).map((tensor) => tensor.data),
  );
}

/**
 * Frees the buffers under `views` now, each once, except those under
 * `keep`: for arrays this code allocated itself and is done with (a
 * prefill's outputs once copied into the cache, a cache buffer replaced by
 * a larger one), which would otherwise count as external memory until a
 * mark-compact, as a step's outputs did.
 */
export function releaseBuffers(
  views: Iterable<ArrayBufferView>,
  keep: Iterable<ArrayBufferView> = [],
): void {
  const kept = new Set<ArrayBufferLike>();
  for (const view of keep) kept.add(view.buffer);
  for (const view of views) {
    const buffer = view.buffer;
    if (kept.has(buffer) || !(buffer instanceof ArrayBuffer)) continue;
    kept.add(buffer);
    const detachable = buffer as ArrayBuffer & Detachable;
    if (!detachable.detached) detachable.transfer(0);
  }
}
