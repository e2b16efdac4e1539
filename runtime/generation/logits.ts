/**
 * Small pure functions over one row of logits. They run once per generated
 * token per sequence, so the sampling path allocates nothing per call: the
 * caller passes scratch space (see `SamplingScratch`), sized once.
 */

export function argmax(logits: Float32Array): number {
  let best = 0;
  let bestValue = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    const value = logits[i]!;
    if (value > bestValue) {
      bestValue = value;
      best = i;
    }
  }
  return best;
}

/** Reusable buffers for one sampler: probabilities and candidate ids, a vocabulary each. */
export class SamplingScratch {
  private probs = new Float32Array(0);
  private ids = new Int32Array(0);

  probabilities(size: number): Float32Array {
    if (this.probs.length < size) this.probs = new Float32Array(size);
    return this.probs.subarray(0, size);
  }

  candidates(size: number): Int32Array {
    if (this.ids.length < size) this.ids = new Int32Array(size);
    return this.ids.subarray(0, size);
  }
}

/** Softmax of logits / temperature, into `out` (a new array when none is given). */
export function softmaxWithTemperature(
  logits: Float32Array,
  temperature: number,
  out: Float32Array = new Float32Array(logits.length),
): Float32Array {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    const p = Math.exp((logits[i]! - max) / temperature);
    out[i] = p;
    sum += p;
  }
  for (let i = 0; i < logits.length; i++) out[i] = out[i]! / sum;
  return out;
}

/**
 * Nucleus sampling: draws from the smallest set of most probable tokens whose
 * probability reaches `topP`; `random` is a uniform draw in [0, 1). Ties keep
 * id order, as a stable sort of the whole vocabulary would.
 *
 * Instead of sorting the whole vocabulary for every token, it sorts only the
 * tokens above a threshold, lowering the threshold until they hold `topP`:
 * every token left out is less probable than every token kept, so the kept
 * ones, sorted, are exactly the head of the full order.
 */
export function sampleTopP(
  probs: Float32Array,
  topP: number,
  random: number,
  scratch: SamplingScratch = new SamplingScratch(),
): number {
  if (topP >= 1) return sampleFrom(probs, random);
  const ids = scratch.candidates(probs.length);
  let threshold = 1 / probs.length;
  for (;;) {
    let count = 0;
    let mass = 0;
    for (let i = 0; i < probs.length; i++) {
      if (probs[i]! >= threshold) {
        ids[count++] = i;
        mass += probs[i]!;
      }
    }
    // At least one candidate: top_p 0 is met by none, and a flat distribution
    // in float32 can leave every probability just under 1/V.
    if ((count > 0 && mass >= topP) || threshold === 0) {
      return drawFromNucleus(probs, ids.subarray(0, count), topP, random);
    }
    threshold = threshold > 1e-12 ? threshold / 16 : 0;
  }
}

function drawFromNucleus(
  probs: Float32Array,
  candidates: Int32Array,
  topP: number,
  random: number,
): number {
  // Stable: equal probabilities keep id order.
  candidates.sort((a, b) => probs[b]! - probs[a]! || a - b);
  let kept = 0;
  let mass = 0;
  // At least the most probable token: top_p 0 is a nucleus of one.
  while (kept < candidates.length && (kept === 0 || mass < topP)) {
    mass += probs[candidates[kept++]!]!;
  }
  let target = random * mass;
  for (let i = 0; i < kept; i++) {
    const id = candidates[i]!;
    target -= probs[id]!;
    if (target < 0) return id;
  }
  return candidates[kept - 1]!;
}

function sampleFrom(probs: Float32Array, random: number): number {
  let target = random;
  for (let i = 0; i < probs.length; i++) {
    target -= probs[i]!;
    if (target < 0) return i;
  }
  return probs.length - 1;
}
