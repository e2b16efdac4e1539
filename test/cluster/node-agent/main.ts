// The node agent: runs the pods the scheduler binds to one Node as local
// processes in network namespaces. See test/cluster/README.md, "Node agent".
//   npx tsx test/cluster/node-agent/main.ts --kubeconfig FILE [--node-name N] [--pod-cidr CIDR] [--state-dir DIR]
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger } from "../../../lib/logger.js";
import { startAgent } from "./agent.js";
import { parseCliOptions, USAGE } from "./options.js";

const repoRoot = resolve(fileURLToPath(new URL("../../..", import.meta.url)));

let options;
try {
  options = parseCliOptions(process.argv.slice(2), repoRoot);
} catch (err) {
  console.error(`${(err as Error).message}\n${USAGE}`);
  process.exit(2);
}

const log = createLogger({
  name: "node-agent",
  ...(options.logLevel ? { level: options.logLevel } : {}),
});
log.info({ ...options }, "node agent starting");

// Signals that arrive during start-up wait for it, so that what was
// created is still cleaned up; a second signal gives up at once.
let stopRequested = false;
let agent: Awaited<ReturnType<typeof startAgent>> | undefined;
async function shutdown(signal: string): Promise<void> {
  if (stopRequested) {
    log.warn({ signal }, "second signal, exiting without cleanup");
    process.exit(1);
  }
  stopRequested = true;
  log.info({ signal }, "shutting down");
  if (agent) {
    await agent.stop();
    process.exit(0);
  }
}
process.on("SIGTERM", (s) => void shutdown(s));
process.on("SIGINT", (s) => void shutdown(s));

try {
  agent = await startAgent({ ...options, repoRoot, log });
  log.info({ node: options.nodeName }, "node agent running");
  if (stopRequested) {
    await agent.stop();
    process.exit(0);
  }
} catch (err) {
  log.fatal({ err: (err as Error).message }, "node agent failed to start");
  process.exit(1);
}
