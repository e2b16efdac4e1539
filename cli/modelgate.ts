#!/usr/bin/env node
import { Command, Option } from "commander";

/**
 * The one command-line entry: every role of the image is a subcommand, so
 * one container image serves them all. Each subcommand loads its component
 * lazily; the gateway does not pay for onnxruntime.
 */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

const program = new Command("modelgate").description(
  "Model inference on Kubernetes behind a Responses-style HTTP API",
);

const runtime = program.command("runtime").description("the model server inside an inference pod");

runtime
  .command("serve")
  .description("serve one ONNX model on POST /v1/responses")
  .option("--model-path <dir>", "model folder (Hugging Face / Optimum ONNX layout)")
  .option("--model-id <id>", "the model id clients send (default: the folder's name)")
  .option("--onnx-file <path>", "graph file inside the folder (default: onnx/model.onnx, ...)")
  .addOption(
    new Option("--task <task>").choices([
      "text-generation",
      "zero-shot-classification",
      "entity-extraction",
    ]),
  )
  .addOption(new Option("--zero-shot-method <method>").choices(["nli", "similarity"]))
  .option("--max-tokens <n>", "input token limit (default: the model's context length)")
  .addOption(new Option("--overflow <policy>", "past maxTokens").choices(["truncate", "error"]))
  .option("--threads <n>", "intra-op threads (default: the cgroup CPU limit)")
  .option("--host <host>", "listen address (default 0.0.0.0)")
  .option("--port <port>", "listen port (default 8080)")
  .option("--max-batch-size <n>", "classification requests per model run")
  .option("--batch-window-ms <ms>", "how long a classification batch waits to fill")
  .option("--generation-concurrency <n>", "generations decoded at once")
  .option("--max-queue <n>", "waiting requests before 429")
  .option(
    "--kv-cache-tokens <n>",
    "KV cache positions decoding sequences may reserve together (default: concurrency x maxTokens)",
  )
  .option(
    "--prefix-cache-bytes <n>",
    "bytes of prefilled KV cache kept for prompts that start with the same tokens (default 128 MiB; 0 disables)",
  )
  .option(
    "--prefill-chunk-tokens <n>",
    "prompt tokens per prefill run, and the unit the prefix cache reuses (default 64)",
  )
  .option("--hypothesis-template <text>", "zero-shot hypothesis, with {} for the label")
  .option(
    "--similarity-midpoint <cosine>",
    "similarity zero-shot: the cosine that scores 0.5 (default 0.2)",
  )
  .option(
    "--similarity-steepness <k>",
    "similarity zero-shot: slope of the logistic calibration (default 10)",
  )
  .option("--log-level <level>")
  .action(async (flags: Record<string, unknown>) => {
    const { serveRuntime } = await import("../runtime/main.js");
    await serveRuntime(flags);
  });

runtime
  .command("fetch")
  .description("copy a model from its source URI into a folder, atomically")
  .requiredOption(
    "--source <uri>",
    "file://, https://, hf://org/name@revision or s3://bucket/prefix",
  )
  .requiredOption("--dest <dir>", "destination folder")
  .option("--revision <rev>", "hf:// revision (overrides @revision in the URI)")
  .option("--sha256 <path=hex>", "expected sha256 of a file (repeatable)", collect, [])
  .option("--checksums-file <file>", "sha256sum-format file of expected digests")
  .option(
    "--file <path>",
    "a file to fetch, for an https source without SHA256SUMS (repeatable)",
    collect,
    [],
  )
  .option("--endpoint <url>", "hub or S3 endpoint")
  .option("--ca-file <pem>", "extra trusted CA certificates for https sources")
  .action(async (flags: { source: string; dest: string }) => {
    const { runFetchCommand } = await import("../runtime/fetch/cli.js");
    process.exitCode = await runFetchCommand(flags);
  });

program
  .command("gateway")
  .description("the front door: POST /v1/responses and /pay/v1/responses")
  .option("--host <host>", "listen address (default 0.0.0.0)")
  .option("--port <port>", "listen port of the API (default 8080)")
  .option("--metrics-port <port>", "/healthz, /readyz and /metrics port (default 9090)")
  .option(
    "--request-timeout <seconds>",
    "seconds a client has to send its whole request; 408 after (default 30)",
  )
  .option(
    "--upload-timeout <seconds>",
    "seconds a file upload (POST /v1/files) has to arrive; 408 after (default 900)",
  )
  .option("--models-dir <dir>", "folder of InferenceModel YAML to route to (file source)")
  .addOption(
    new Option(
      "--registry <source>",
      "where models come from (default: file with --models-dir, else kubernetes)",
    ).choices(["file", "kubernetes"]),
  )
  .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG, then the service account)")
  .option("--watch-namespace <ns>", "only route models of this namespace (default: all)")
  .option("--keys-file <file>", "API keys file (hashed keys, accounts, projects)")
  .option(
    "--state-dir <dir>",
    "where the usage and settlement journals and the embedded ledger database are kept",
  )
  .option(
    "--journal-sync <when>",
    "journals reach the disk: always (before each answer) or within a duration (default 100ms)",
  )
  .option(
    "--database-url <url>",
    "PostgreSQL for the usage ledger (default: embedded PGlite in the state folder); prefer MODELGATE_DATABASE_URL, a flag is visible in ps",
  )
  .option(
    "--database-ssl-mode <mode>",
    "TLS to PostgreSQL: disable, require, verify-ca or verify-full (default: as the URL says)",
  )
  .option("--database-ca-file <pem>", "CA certificates to trust for PostgreSQL over TLS")
  .option(
    "--response-retention-seconds <s>",
    "how long stored responses (store: true) are kept before they are swept (default 2592000, 30 days)",
  )
  .option("--usage-sink-url <url>", "where usage records are exported")
  .option("--usage-sink-token-file <file>", "bearer token for the usage sink")
  .option("--pay-provider-url <url>", "the payment provider's base URL")
  .option("--pay-provider-credential-file <file>", "bearer credential for the payment provider")
  .option("--pay-signing-secrets-file <file>", "pay-signature secrets by key id (YAML or JSON)")
  .option("--pay-tolerance-seconds <s>", "accepted pay-signature clock skew (default 300)")
  .option("--rate-limit-per-minute <n>", "default requests per minute per API key or agent")
  .option("--rate-limit-burst <n>", "default burst per API key or agent")
  .option(
    "--rate-limit-tokens-per-minute <n>",
    "default input+output tokens per minute per API key or agent (default: none)",
  )
  .option("--valkey-url <url>", "Valkey/Redis shared by the replicas: limits, used signatures")
  .option("--valkey-password-file <file>", "the Valkey password (default: none)")
  .option("--valkey-ca-file <pem>", "CA certificates to trust for a rediss:// Valkey")
  .option("--replicas <n>", "gateway replicas; the limits are split by it while Valkey is down")
  .option("--body-limit-bytes <n>", "largest request body")
  .option(
    "--batch-workers <n>",
    "batch lines this replica keeps in flight at most; 0: none (default 32)",
  )
  .option(
    "--batch-completion-window <s>",
    "seconds a batch has before its unfinished lines expire (default 86400)",
  )
  .option(
    "--batch-lease-seconds <s>",
    "seconds a batch line is leased to a worker before another may take it (default 60)",
  )
  .option("--batch-poll-ms <ms>", "how often an idle batch worker looks for work (default 500)")
  .option(
    "--batch-paced-spacing-ms <ms>",
    "milliseconds between batch lines beside interactive traffic (default 5)",
  )
  .option("--log-level <level>")
  .action(async (flags: Record<string, unknown>) => {
    const { serveGateway } = await import("../gateway/main.js");
    await serveGateway(flags);
  });

program
  .command("operator")
  .description("reconciles InferenceModels into runtime Deployments, Services, HPAs and PDBs")
  .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG, then the service account)")
  .option("--watch-namespace <ns>", "only reconcile models of this namespace (default: all)")
  .option("--runtime-image <image>", "the image of the model pods (required)")
  .addOption(
    new Option("--runtime-image-pull-policy <policy>", "pull policy of the model pods").choices([
      "IfNotPresent",
      "Always",
      "Never",
    ]),
  )
  .option("--leader-elect", "elect a leader through a Lease (the default)")
  .option("--no-leader-elect", "act without a leader Lease (one replica only)")
  .option("--lease-name <name>", "leader-election Lease (default modelgate-operator)")
  .option("--lease-namespace <ns>", "the Lease's namespace (default: $POD_NAMESPACE)")
  .option("--lease-duration-seconds <s>", "how long a silent leader keeps the Lease (default 15)")
  .option("--renew-deadline-seconds <s>", "a leader that cannot renew this long stops (default 10)")
  .option("--retry-period-seconds <s>", "how often the Lease is tried or renewed (default 2)")
  .option("--host <host>", "health and metrics address (default 0.0.0.0)")
  .option("--port <port>", "/healthz, /readyz and /metrics port (default 8081)")
  .option("--workers <n>", "models reconciled at once (default 4)")
  .option("--log-level <level>")
  .action(async (flags: Record<string, unknown>) => {
    const { serveOperator } = await import("../operator/main.js");
    // commander sets leaderElect true unless --no-leader-elect: only an
    // explicit false is a flag, so MODELGATE_LEADER_ELECT still applies.
    if (flags.leaderElect === true) delete flags.leaderElect;
    await serveOperator(flags);
  });

const keys = program.command("keys").description("API keys for the gateway");
keys
  .command("create")
  .description("print a new API key once, and the entry to add to the keys file")
  .requiredOption("--account <id>", "the account the key bills to")
  .option("--project <id>", "limit the key to a project (repeatable)", collect, [])
  .option("--id <id>", "key id (default: generated)")
  .option("--requests-per-minute <n>", "the key's own rate limit")
  .option("--burst <n>", "the key's own burst")
  .option("--tokens-per-minute <n>", "the key's own token limit (with the two above)")
  .action(async (flags: Record<string, unknown>) => {
    const { runKeysCreateCommand } = await import("../gateway/auth/keys-command.js");
    process.exitCode = await runKeysCreateCommand({ ...flags, projects: flags.project });
  });

program
  .command("dev")
  .description(
    "run the whole platform on this machine: runtimes, gateway, a demo key and a local payment provider",
  )
  .option(
    "--models-dir <dir>",
    "folder of InferenceModel YAML (default: examples/dev, the generated test models)",
  )
  .option("--port <port>", "gateway port (default 8080)")
  .option("--host <host>", "gateway address (default 127.0.0.1)")
  .option(
    "--state-dir <dir>",
    "where keys, secrets, journals and the ledger database go (default .modelgate/dev)",
  )
  .option("--no-pay", "do not start the local payment provider")
  .action(async (flags: Record<string, unknown>) => {
    const { runDev } = await import("./dev/dev-command.js");
    await runDev(flags);
  });

const batch = program
  .command("batch")
  .description("operators' Batch API tools (MODELGATE_BASE_URL, MODELGATE_API_KEY)");
const withConnection = (command: Command) =>
  command
    .option("--base-url <url>", "the gateway (MODELGATE_BASE_URL; default http://127.0.0.1:8080)")
    .option("--api-key <key>", "the API key; prefer MODELGATE_API_KEY, a flag is visible in ps")
    .option("--project <id>", "a project of the key's account (MODELGATE_PROJECT)");
withConnection(
  batch
    .command("submit")
    .description("upload a JSONL file of /v1/responses requests and start a batch; prints its id")
    .argument("<file>", "the batch input file (JSONL)")
    .option("--metadata <key=value>", "batch metadata (repeatable)", collect, []),
).action(async (file: string, flags: Record<string, unknown>) => {
  const { runBatchSubmit } = await import("./batch-command.js");
  process.exitCode = await runBatchSubmit({ ...flags, file });
});
withConnection(
  batch
    .command("watch")
    .description("a progress bar on stderr until the batch ends; exit 0 only when completed")
    .argument("<batch_id>")
    .option("--interval-ms <ms>", "how often to look (default 1000)"),
).action(async (batchId: string, flags: Record<string, unknown>) => {
  const { runBatchWatch } = await import("./batch-command.js");
  const intervalMs = flags.intervalMs === undefined ? undefined : Number(flags.intervalMs);
  process.exitCode = await runBatchWatch({ ...flags, batchId, intervalMs });
});
withConnection(
  batch
    .command("results")
    .description("write a batch's output lines (default stdout) and error lines")
    .argument("<batch_id>")
    .option("--out <file>", "where the output file goes (default: stdout)")
    .option("--errors <file>", "where the error file goes"),
).action(async (batchId: string, flags: Record<string, unknown>) => {
  const { runBatchResults } = await import("./batch-command.js");
  process.exitCode = await runBatchResults({ ...flags, batchId });
});

const pay = program.command("pay").description("payment-route tools");
pay
  .command("sign")
  .description("print a pay-signature header value for a request body")
  .requiredOption("--kid <id>", "the signing key id")
  .requiredOption("--secret-file <file>", "file holding the signing secret")
  .option("--body <json>", "the exact request body")
  .option("--body-file <file>", "a file holding the exact request body")
  .action(async (flags: { kid: string; secretFile: string; body?: string; bodyFile?: string }) => {
    const { runPaySign } = await import("./pay-sign.js");
    process.exitCode = await runPaySign(flags);
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`modelgate: ${(error as Error).message}\n`);
  process.exitCode = 1;
});
