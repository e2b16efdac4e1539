// The gateway under test, in its own process, wired exactly as
// gateway/main.ts (`modelgate gateway`) wires it: the same config parser on
// the same flags, the same logger (JSON request logs at the given level, to
// stdout, which run.ts points at /dev/null), real components, the file model
// source. The only differences: it listens on a free port and reports
// `{ url }` over IPC, because main.ts has no way to say which port it got,
// and it reports only once its ledger is open (see below).
import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import { buildGateway } from "../../../gateway/app.js";
import { createGatewayComponents } from "../../../gateway/components.js";
import { parseGatewayConfig } from "../../../gateway/config.js";
import { FileSource } from "../../../gateway/registry/file-source.js";
import { createLogger } from "../../../lib/logger.js";

const flags = JSON.parse(process.argv[2] ?? "{}") as Record<string, string>;
const config = parseGatewayConfig(flags, {});
const logger = createLogger({ level: config.logLevel, name: "gateway" });
const components = await createGatewayComponents(config, logger);
// main.ts opens the ledger in the background and serves meanwhile. Here the
// child is ready only once it is open: opening (migrations, and for the
// embedded PGlite its WebAssembly start) is a one-time cost of seconds of
// CPU that would otherwise land on the first points measured, as if it were
// paid per request.
await components.store.store();
const source = new FileSource({
  dir: config.modelsDir!,
  registry: components.deps.registry,
  logger,
});
const loaded = await source.start();
if (loaded.models.length !== 1) {
  throw new Error(`expected one model in ${config.modelsDir}, loaded ${loaded.models.length}`);
}
const app = buildGateway(components.deps);
const url = await app.listen({ host: config.host, port: config.port });

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  source.stop();
  await app.close();
  await components.close();
  // `--cpu-prof` still writes its file on process.exit.
  process.exit(0);
}
/**
 * The benchmark's CPU split (cpu-split.ts) profiles this process's main
 * thread over one window: `{ profile: "start" }`, then `{ profile: "stop",
 * path }`, which writes the profile there. Each is answered `{ profile }`
 * once done. The inspector session exists only once asked for.
 */
let session: Session | null = null;
process.on("message", (message: { profile?: string; path?: string }) => {
  void (async () => {
    if (message.profile === "start") {
      session = new Session();
      session.connect();
      await session.post("Profiler.enable");
      await session.post("Profiler.start");
    } else if (message.profile === "stop" && session && message.path) {
      const { profile } = await session.post("Profiler.stop");
      await writeFile(message.path, JSON.stringify(profile));
      await session.post("Profiler.disable");
      session.disconnect();
    }
    process.send!({ profile: message.profile });
  })();
});
process.once("SIGTERM", () => void stop());
process.once("disconnect", () => void stop());
process.send!({ url });
