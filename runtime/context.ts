import type { RuntimeMetrics } from "./metrics.js";
import type { ModelService } from "./model-service.js";

/**
 * What the runtime's routes need, built by `buildRuntime`'s caller and never
 * read from globals. In a module of its own so that `app.ts` and the routes
 * it registers depend on it, not on each other.
 */
export interface RuntimeContext {
  modelId: string;
  /** Null until the model is loaded and warmed. */
  service: () => ModelService | null;
  metrics: RuntimeMetrics;
  now: () => number;
}
