// Loaded into a server child of the beside benchmark with `--timeline`
// (NODE_OPTIONS `--import`; see run.ts): serves, on the loopback port in
// MODELGATE_BENCH_PROBE_PORT, the process's GC time so far and its event
// loop's longest delay since the previous read, so that the timeline can
// place a slow request beside a pause of the gateway or the runtime. A
// separate server: the children's own metrics endpoints are not all started
// by their bench wiring.
import { createServer } from "node:http";
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";

const port = Number(process.env.MODELGATE_BENCH_PROBE_PORT);
if (port > 0) {
  let gcMs = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcMs += entry.duration;
  }).observe({ entryTypes: ["gc"] });
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const server = createServer((_request, response) => {
    const body = JSON.stringify({ gcMs, lagMaxMs: delay.max / 1e6 });
    delay.reset();
    response.end(body);
  });
  server.listen(port, "127.0.0.1");
  // Never what keeps the child alive.
  server.unref();
}
