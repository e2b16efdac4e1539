import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** The runtime's Prometheus metrics, on a registry of its own (no global state). */
export interface RuntimeMetrics {
  registry: Registry;
  requests: Counter<"status_code">;
  duration: Histogram<"task">;
  timeToFirstToken: Histogram;
  inputTokens: Counter;
  outputTokens: Counter;
  batchSize: Histogram;
  queueDepth: Gauge;
  inFlight: Gauge;
  queueWait: Histogram<"priority">;
  prefixCacheBytes: Gauge;
  prefixCacheHits: Counter;
  prefixCachedTokens: Counter;
  preemptions: Counter;
}

export function createRuntimeMetrics(labels: { model: string }): RuntimeMetrics {
  const registry = new Registry();
  registry.setDefaultLabels(labels);
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    requests: new Counter({
      name: "modelgate_runtime_requests_total",
      help: "Responses requests answered, by HTTP status",
      labelNames: ["status_code"],
      registers,
    }),
    duration: new Histogram({
      name: "modelgate_runtime_request_duration_seconds",
      help: "Time from a request's arrival to its answer",
      labelNames: ["task"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    timeToFirstToken: new Histogram({
      name: "modelgate_runtime_time_to_first_token_seconds",
      help: "Time from the start of generation to the first sampled token",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    inputTokens: new Counter({
      name: "modelgate_runtime_input_tokens_total",
      help: "Input tokens processed",
      registers,
    }),
    outputTokens: new Counter({
      name: "modelgate_runtime_output_tokens_total",
      help: "Output tokens generated",
      registers,
    }),
    batchSize: new Histogram({
      name: "modelgate_runtime_batch_size",
      help: "Requests per model run",
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers,
    }),
    queueDepth: new Gauge({
      name: "modelgate_runtime_queue_depth",
      help: "Requests waiting for the model",
      registers,
    }),
    inFlight: new Gauge({
      name: "modelgate_runtime_requests_in_flight",
      help: "Requests running on the model",
      registers,
    }),
    queueWait: new Histogram({
      name: "modelgate_runtime_queue_wait_seconds",
      help: "Time a request waited in the admission queue before the model took it, by lane",
      labelNames: ["priority"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    prefixCacheBytes: new Gauge({
      name: "modelgate_runtime_prefix_cache_bytes",
      help: "Bytes of keys and values the prefix cache holds for later prompts",
      registers,
    }),
    prefixCacheHits: new Counter({
      name: "modelgate_runtime_prefix_cache_hits_total",
      help: "Generations whose prompt started from the prefix cache",
      registers,
    }),
    prefixCachedTokens: new Counter({
      name: "modelgate_runtime_prefix_cached_tokens_total",
      help: "Prompt tokens read from the prefix cache instead of prefilled",
      registers,
    }),
    preemptions: new Counter({
      name: "modelgate_runtime_preemptions_total",
      help: "Batch sequences that gave their decode place up to an interactive one, to resume later",
      registers,
    }),
  };
}
