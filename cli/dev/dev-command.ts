import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { modelIdOf, type InferenceModel } from "../../crds/inference-model.js";
import { buildGateway } from "../../gateway/app.js";
import { createGatewayComponents } from "../../gateway/components.js";
import { parseGatewayConfig } from "../../gateway/config.js";
import { createGatewayLogger } from "../../gateway/logging.js";
import { FileSource, readModelFolder } from "../../gateway/registry/file-source.js";
import { fetchModel } from "../../runtime/fetch/fetch-model.js";
import { startChild, waitUntilReady, type Child } from "./child-process.js";
import { DEMO_KID, DEMO_PROJECT, loadOrCreateDemoCredentials } from "./demo-credentials.js";
import { banner, howToCall } from "./how-to-call.js";
import { locateModel } from "./model-paths.js";

/**
 * `modelgate dev`: the whole platform on one machine. One runtime process
 * per InferenceModel in a folder, a local payment provider, a demo API key,
 * and the gateway in this process; then it prints curl lines that work as
 * written. Ctrl-C stops every child before the command exits.
 */
export interface DevOptions {
  modelsDir?: string;
  port?: string;
  host?: string;
  stateDir?: string;
  pay?: boolean;
}

const HERE = dirname(fileURLToPath(import.meta.url));
/** The checkout's root, from cli/dev/ in source or dist/cli/dev/ when built. */
const ROOT = [resolve(HERE, "../.."), resolve(HERE, "../../..")].find((dir) =>
  existsSync(join(dir, "package.json")),
)!;
const CLI = [join(ROOT, "cli/modelgate.ts"), join(ROOT, "dist/cli/modelgate.js")].find(
  (file) =>
    existsSync(file) && (file.endsWith(".js") || process.execArgv.join(" ").includes("tsx")),
)!;
const PROVIDER = join(ROOT, "test/fixtures/payment-provider/main.ts");

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as { port: number };
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

function runtimeArgs(model: InferenceModel, path: string, port: number): string[] {
  const tuning = model.spec.runtime ?? {};
  const args = [
    "runtime",
    "serve",
    "--model-path",
    path,
    "--model-id",
    modelIdOf(model),
    "--task",
    model.spec.task,
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--overflow",
    model.spec.overflow,
  ];
  const optional: Array<[string, string | number | undefined]> = [
    ["--max-tokens", model.spec.maxTokens],
    ["--threads", tuning.threads],
    ["--max-batch-size", tuning.maxBatchSize],
    ["--batch-window-ms", tuning.batchWindowMs],
    ["--generation-concurrency", tuning.generationConcurrency],
    ["--max-queue", tuning.maxQueue],
    ["--zero-shot-method", tuning.zeroShotMethod],
    ["--hypothesis-template", tuning.hypothesisTemplate],
    ["--similarity-midpoint", tuning.similarityMidpoint],
    ["--similarity-steepness", tuning.similaritySteepness],
  ];
  for (const [flag, value] of optional) if (value !== undefined) args.push(flag, String(value));
  return args;
}

export async function runDev(options: DevOptions): Promise<void> {
  const modelsDir = resolve(options.modelsDir ?? join(ROOT, "examples/dev"));
  const stateDir = resolve(options.stateDir ?? ".modelgate/dev");
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const children: Child[] = [];
  let stopping = false;
  const stopAll = async () => {
    await Promise.all(children.map((child) => child.stop()));
  };

  try {
    await mkdir(stateDir, { recursive: true });
    const { models, problems } = await readModelFolder(modelsDir);
    for (const problem of problems)
      say(`modelgate dev: skipping ${problem.file}: ${problem.message}`);
    if (models.length === 0) throw new Error(`no InferenceModel in ${modelsDir}`);

    // 1. One runtime per model, fetched first when its source is not a local folder.
    const endpoints = new Map<string, string>();
    for (const model of models) {
      const id = modelIdOf(model);
      const location = locateModel(model, modelsDir);
      let path =
        location.kind === "local" ? location.path : join(stateDir, "models", model.metadata.name);
      if (location.kind === "fetch") {
        say(`fetching ${id} from ${location.uri} ...`);
        await fetchModel({
          source: location.uri,
          dest: path,
          ...(model.spec.source.revision ? { revision: model.spec.source.revision } : {}),
          checksums: model.spec.source.checksums ?? {},
        });
      } else if (!existsSync(path)) {
        throw new Error(
          `model ${id}: ${path} does not exist${path.includes("fixtures/models") ? " (run `npm run fixtures` to generate the test models)" : ""}`,
        );
      }
      path = resolve(path);
      const port = await freePort();
      const child = startChild(`runtime ${id}`, CLI, runtimeArgs(model, path, port), say);
      children.push(child);
      say(`starting runtime for ${id} on 127.0.0.1:${port} ...`);
      await waitUntilReady(`http://127.0.0.1:${port}/v2/health/ready`, 120_000, child);
      endpoints.set(id, `http://127.0.0.1:${port}`);
    }

    // 2. The demo credentials (kept in the state folder across restarts) and
    //    a local payment provider.
    const demo = await loadOrCreateDemoCredentials(stateDir);
    let pay: { kid: string; secret: string; secretFile: string } | null = null;
    let providerUrl: string | undefined;
    if (
      options.pay !== false &&
      existsSync(PROVIDER) &&
      process.execArgv.join(" ").includes("tsx")
    ) {
      const provider = startChild(
        "payment-provider",
        PROVIDER,
        ["--credential", demo.providerCredential],
        say,
      );
      children.push(provider);
      providerUrl = (await provider.waitForLine(/^http:\/\//, 20_000)).trim();
      pay = { kid: DEMO_KID, secret: demo.paySecret, secretFile: demo.files.paySecret };
    } else if (options.pay !== false) {
      say(
        "payment route: the local payment provider runs from a source checkout only (npm run dev); /pay/v1 answers 401",
      );
    }

    // 3. The gateway, routing to the runtimes started above. Its other
    //    settings (rate limits, timeouts) come from MODELGATE_* variables, as
    //    for `modelgate gateway`.
    const config = parseGatewayConfig(
      {
        host: options.host ?? "127.0.0.1",
        port: options.port ?? "8080",
        keysFile: demo.files.keys,
        stateDir: join(stateDir, "gateway"),
        ...(pay && providerUrl
          ? {
              payProviderUrl: providerUrl,
              payProviderCredentialFile: demo.files.providerCredential,
              paySigningSecretsFile: demo.files.paySecrets,
            }
          : {}),
        logLevel: process.env.LOG_LEVEL ?? process.env.MODELGATE_LOG_LEVEL ?? "warn",
      },
      process.env,
    );
    // The gateway's own logger: keys and signature digests scrubbed from every line.
    const logger = createGatewayLogger(config.logLevel);
    const components = await createGatewayComponents(config, logger);
    const source = new FileSource({
      dir: modelsDir,
      registry: components.deps.registry,
      logger,
      endpointsOf: (model) => {
        const endpoint = endpoints.get(modelIdOf(model));
        return endpoint ? [endpoint] : [];
      },
    });
    await source.start();
    const app = buildGateway(components.deps);
    const address = await app.listen({ host: config.host, port: config.port });

    for (const line of banner({
      address,
      models: models.length,
      apiKey: demo.apiKey,
      keptIn: stateDir,
      builtInModels: options.modelsDir === undefined,
    }))
      say(line);
    for (const line of howToCall(components.deps.registry.list(), {
      baseUrl: address,
      apiKey: demo.apiKey,
      project: DEMO_PROJECT,
      pay,
      nowSeconds: Math.floor(Date.now() / 1000),
    }))
      say(line);
    say("Press Ctrl-C to stop.");

    await new Promise<void>((done) => {
      const stop = () => {
        if (stopping) return;
        stopping = true;
        say("\nstopping ...");
        done();
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
    source.stop();
    await app.close();
    await components.close();
    await stopAll();
    say("stopped.");
  } catch (error) {
    await stopAll();
    throw error;
  }
}
