import { argmax, sampleTopP, SamplingScratch, softmaxWithTemperature } from "./logits.js";

/** Picks the next token from one row of logits. */
export type Sampler = (logits: Float32Array) => number;

export interface SamplingSettings {
  temperature?: number | null | undefined;
  topP?: number | null | undefined;
}

/** The Responses API's defaults: temperature 1, top_p 1. */
export const DEFAULT_TEMPERATURE = 1;
export const DEFAULT_TOP_P = 1;

/**
 * Temperature 0 is greedy; anything else samples, with `random` as the source.
 * A sampler serves one sequence and keeps its scratch buffers across tokens.
 */
export function chooseSampler(settings: SamplingSettings, random: () => number): Sampler {
  const temperature = settings.temperature ?? DEFAULT_TEMPERATURE;
  const topP = settings.topP ?? DEFAULT_TOP_P;
  if (temperature === 0) return argmax;
  const scratch = new SamplingScratch();
  return (logits) => {
    const probs = softmaxWithTemperature(logits, temperature, scratch.probabilities(logits.length));
    return sampleTopP(probs, topP, random(), scratch);
  };
}
