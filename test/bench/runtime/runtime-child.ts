// The runtime under test, in a process of its own so that the load generator,
// the bare loop and the peer never share its event loop or its threads.
// Started by runtime-process.ts with one JSON argument; prints one JSON line
// `{"url": ...}` once the model is loaded and warmed, and exits when told to
// (SIGTERM) or when its parent goes away (stdin closes).
import { pino } from "pino";
import { buildRuntime } from "../../../runtime/app.js";
import { createRuntimeMetrics } from "../../../runtime/metrics.js";
import { DEFAULT_THROUGHPUT, ModelService } from "../../../runtime/model-service.js";
import { loadModel } from "../../../runtime/model/load-model.js";
import type { ChildConfig } from "./runtime-process.js";

const config = JSON.parse(process.argv[2] ?? "{}") as ChildConfig;

// The same wiring and order as runtime/main.ts, minus logs (the benchmark
// reads stdout): listen first, then warm up, and only then answer as ready,
// so that the benchmark starts the runtime the way a pod does.
const model = await loadModel({
  ...config.load,
  path: config.path,
  overflow: "truncate",
  threads: config.threads,
});
const metrics = createRuntimeMetrics({ model: config.modelId });
const service = new ModelService(
  model,
  { ...DEFAULT_THROUGHPUT, ...config.throughput },
  metrics,
  Math.random,
);
let ready = false;
const app = buildRuntime({
  modelId: config.modelId,
  service: () => (ready ? service : null),
  metrics,
  now: Date.now,
  logger: pino({ level: "silent" }),
});
const url = await app.listen({ host: "127.0.0.1", port: 0 });
await service.warmup();
ready = true;

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  service.close();
  await app.close();
  await model.session.release();
  // process.exit skips nothing we need, and `--cpu-prof` still writes its file.
  process.exit(0);
}
process.once("SIGTERM", () => void stop());
process.stdin.on("end", () => void stop());
process.stdin.on("close", () => void stop());
process.stdin.resume();
process.stdout.write(`${JSON.stringify({ url })}\n`);
