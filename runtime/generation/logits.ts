/**
 * Small pure functions over one row of logits. They never allocate more than
 * one vocabulary-sized array, because they run once per generated token.
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

/** Softmax of logits / temperature, in a new array. */
export function softmaxWithTemperature(logits: Float32Array, temperature: number): Float32Array {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  const probs = new Float32Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    const p = Math.exp((logits[i]! - max) / temperature);
    probs[i] = p;
    sum += p;
  }
  for (let i = 0; i < probs.length; i++) probs[i] = probs[i]! / sum;
  return probs;
}

/**
 * Nucleus sampling: draws from the smallest set of tokens whose probability
 * reaches `topP`. `random` is a uniform draw in [0, 1).
 */
export function sampleTopP(probs: Float32Array, topP: number, random: number): number {
  if (topP >= 1) return sampleFrom(probs, random);
  const order = Array.from(probs.keys()).sort((a, b) => probs[b]! - probs[a]!);
  let kept = 0;
  let mass = 0;
  while (kept < order.length && mass < topP) mass += probs[order[kept++]!]!;
  let target = random * mass;
  for (let i = 0; i < kept; i++) {
    const id = order[i]!;
    target -= probs[id]!;
    if (target < 0) return id;
  }
  return order[kept - 1]!;
}

function sampleFrom(probs: Float32Array, random: number): number {
  let target = random;
  for (let i = 0; i < probs.length; i++) {
    target -= probs[i]!;
    if (target < 0) return i;
  }
  return probs.length - 1;
}
