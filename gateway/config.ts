import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { RUNTIME_BODY_LIMIT_BYTES } from "../api/runtime-wire.js";
import { parseSettings } from "../lib/settings.js";
import type { JournalSync } from "./outbox/journal-file.js";

/**
 * `modelgate gateway` settings: flags first, then MODELGATE_* variables,
 * then defaults, parsed once with zod so a bad value stops start-up with
 * the setting's name. Secrets come from files (mounted Secrets), never flags.
 */
const positiveInt = z.coerce.number().int().positive();

/**
 * When the outbox journals (usage records, settlements) reach the disk:
 * `always` before each answer, or a background sync at most this long after
 * a write (`100ms`, `1s`). Either way a record is written before the answer,
 * so a restart or crash of the gateway loses none; the interval is what a
 * crash of the machine can lose. See docs/metering.md.
 */
export const journalSyncSchema = z
  .string()
  .regex(/^(always|[1-9][0-9]*(ms|s))$/, "must be always, or a duration such as 100ms or 1s")
  .refine((value) => value === "always" || syncIntervalMs(value) <= 60_000, "must be at most 60s")
  .transform((value): JournalSync =>
    value === "always" ? "always" : { everyMs: syncIntervalMs(value) },
  );

function syncIntervalMs(duration: string): number {
  const amount = Number.parseInt(duration, 10);
  return duration.endsWith("ms") ? amount : amount * 1000;
}

export const gatewayConfigSchema = z.object({
  host: z.string().default("0.0.0.0"),
  port: z.coerce.number().int().min(0).max(65535).default(8080),
  /** `/metrics`, `/healthz` and `/readyz`: never on the API port. */
  metricsPort: z.coerce.number().int().min(0).max(65535).default(9090),
  /**
   * Seconds a client has to send its whole request, headers and body; a
   * slower one is answered 408 and disconnected. Not the time to answer:
   * the model's `timeoutSeconds` bounds that.
   */
  requestTimeout: z.coerce.number().int().min(1).max(3600).default(30),
  /** Seconds a file upload's body has to arrive (`POST /v1/files`); 408 after. */
  uploadTimeout: z.coerce.number().int().min(1).max(86_400).default(900),
  modelsDir: z.string().min(1).optional(),
  /** Where models come from; default: `file` when modelsDir is set, else `kubernetes`. */
  registry: z.enum(["file", "kubernetes"]).optional(),
  /** Default: KUBECONFIG, then the pod's service account. */
  kubeconfig: z.string().min(1).optional(),
  /** Default: every namespace. */
  watchNamespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a namespace name (DNS-1123 label)")
    .max(63)
    .optional(),
  keysFile: z.string().min(1).optional(),
  stateDir: z.string().min(1).default(".modelgate/gateway"),
  journalSync: journalSyncSchema.prefault("100ms"),
  /**
   * The PostgreSQL server that holds the usage ledger (`postgres://…`);
   * without one, an embedded PGlite database in `<stateDir>/db`. Holds a
   * password: the chart sets it from a Secret, as MODELGATE_DATABASE_URL.
   */
  databaseUrl: z
    .string()
    .regex(/^postgres(ql)?:\/\/[^\s]+$/, "must be a postgres:// or postgresql:// URL")
    .optional(),
  /**
   * TLS to the PostgreSQL server, set on the URL as libpq's `sslmode` and
   * `sslrootcert` (which the driver reads): the chart takes the URL from one
   * Secret (CloudNativePG's app Secret) and the CA from another.
   */
  databaseSslMode: z.enum(["disable", "require", "verify-ca", "verify-full"]).optional(),
  databaseCaFile: z.string().min(1).optional(),
  usageSinkUrl: z.url().optional(),
  usageSinkTokenFile: z.string().min(1).optional(),
  /**
   * How long a stored response (`store: true`) is kept, in seconds: default
   * 30 days, as the OpenAI API keeps them. Expired rows are unreadable at
   * once and swept in the background.
   */
  responseRetentionSeconds: positiveInt.max(10 * 365 * 24 * 3600).default(30 * 24 * 3600),
  payProviderUrl: z.url().optional(),
  payProviderCredentialFile: z.string().min(1).optional(),
  paySigningSecretsFile: z.string().min(1).optional(),
  payToleranceSeconds: positiveInt.default(300),
  rateLimitPerMinute: positiveInt.default(600),
  rateLimitBurst: positiveInt.default(60),
  /** Default input plus output tokens a minute per API key or agent; unset: no token limit. */
  rateLimitTokensPerMinute: positiveInt.max(1_000_000_000).optional(),
  /**
   * Valkey (or Redis) shared by every replica: rate limits and used payment
   * signatures (`redis://host:6379`, `rediss://` for TLS). Unset: this
   * process's memory, right for one replica. The password comes from
   * `valkeyPasswordFile`, never the URL of a flag.
   */
  valkeyUrl: z
    .url()
    .refine((url) => /^rediss?:\/\//.test(url), "must be a redis:// or rediss:// URL")
    .optional(),
  valkeyPasswordFile: z.string().min(1).optional(),
  /** PEM CA certificates to trust for a `rediss://` Valkey (default: the system's). */
  valkeyCaFile: z.string().min(1).optional(),
  /**
   * Gateway replicas sharing the limits: while Valkey is unreachable each
   * replica enforces the limit divided by this (docs/state.md).
   */
  replicas: positiveInt.max(1000).default(1),
  /** At most what a runtime takes: a continued conversation is forwarded within it too. */
  bodyLimitBytes: positiveInt.max(RUNTIME_BODY_LIMIT_BYTES).default(1024 * 1024),
  /**
   * Batch lines this replica keeps in flight at most (docs/batch.md), fewer
   * while the runtimes have interactive work; 0: this replica runs no batch
   * work, only serves the Files and Batch routes. The default is a runtime's
   * default classification step (maxBatchSize), so an idle runtime gets full steps.
   */
  batchWorkers: z.coerce.number().int().min(0).max(1024).default(32),
  /** Seconds a batch has to finish before its unfinished lines expire (24 hours). */
  batchCompletionWindow: positiveInt.max(7 * 86_400).default(86_400),
  /** Seconds a leased batch line is a worker's before another may take it over. */
  batchLeaseSeconds: positiveInt.max(3600).default(60),
  /** Milliseconds an idle batch worker waits before it looks for work again. */
  batchPollMs: positiveInt.max(60_000).default(500),
  /**
   * Milliseconds between a replica's batch lines while the runtime has
   * interactive traffic it keeps up with: the share of spare room a batch
   * keeps beside a steady stream (docs/batch.md, "Priority").
   */
  batchPacedSpacingMs: z.coerce.number().int().min(1).max(1000).default(5),
  logLevel: z.string().default("info"),
});

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;

export function parseGatewayConfig(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): GatewayConfig {
  return parseSettings(gatewayConfigSchema, flags, env);
}

export type RegistrySource =
  | { kind: "file"; dir: string }
  | { kind: "kubernetes"; kubeconfig: string | undefined; namespace: string | undefined };

/**
 * Which source feeds the model registry. A folder given without a source
 * means files, so `--models-dir` alone keeps working; with neither, a
 * gateway is taken to run in a cluster.
 */
export function registrySourceOf(config: GatewayConfig): RegistrySource {
  const kind = config.registry ?? (config.modelsDir ? "file" : "kubernetes");
  if (kind === "file") {
    if (!config.modelsDir) {
      throw new Error("--registry file needs --models-dir (MODELGATE_MODELS_DIR)");
    }
    return { kind, dir: config.modelsDir };
  }
  return { kind, kubeconfig: config.kubeconfig, namespace: config.watchNamespace };
}

/**
 * Payment-route signing secrets by key id, from YAML or JSON such as
 * `{ "kid-2026-11": ["new-secret", "old-secret"] }`: several secrets per kid
 * let a secret rotate without a moment where valid requests fail.
 */
export const signingSecretsSchema = z.record(
  z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "key ids are 1-64 of A-Z a-z 0-9 . _ -"),
  z.union([z.string().min(16), z.array(z.string().min(16)).min(1)]),
);

export function readSigningSecrets(path: string): Map<string, string[]> {
  const parsed = signingSecretsSchema.safeParse(parseYaml(readFileSync(path, "utf8")));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(
      `${path}: ${issue.path.join(".") || "(file)"}: ${issue.message} (secrets are at least 16 characters)`,
    );
  }
  return new Map(
    Object.entries(parsed.data).map(([kid, value]) => [
      kid,
      Array.isArray(value) ? value : [value],
    ]),
  );
}

export function readSecretFile(path: string): string {
  return readFileSync(path, "utf8").trim();
}
