import { argmax, sampleTopP, softmaxWithTemperature } from "./logits.js";

/** Picks the next token from one row of logits. */
export type Sampler = (logits: Float32Array) => number;

export interface SamplingSettings {
  temperature?: number | null | undefined;
  topP?: number | null | undefined;
}

/** The Responses API's defaults: temperature 1, top_p 1. */
export const DEFAULT_TEMPERATURE = 1;
export const DEFAULT_TOP_P = 1;

/** Temperature 0 is greedy; anything else samples, with `random` as the source. */
export function chooseSampler(settings: SamplingSettings, random: () => number): Sampler {
  const temperature = settings.temperature ?? DEFAULT_TEMPERATURE;
  const topP = settings.topP ?? DEFAULT_TOP_P;
  if (temperature === 0) return argmax;
  return (logits) => sampleTopP(softmaxWithTemperature(logits, temperature), topP, random());
}
