import { z } from "zod";
import { FetchError } from "./errors.js";
import type { FetchLogger, FetchProgressEvent } from "./progress.js";
import { DEFAULT_RETRY } from "./retry.js";
import type { SourceUri } from "./source-uri.js";

/** The data part of the options, validated at the entry. */
export const fetchOptionsSchema = z.object({
  /** `file:///…`, `https://…/`, `hf://org/name[@revision]`, `s3://bucket/prefix`. */
  source: z.string().min(1),
  /** Local folder the model ends up in. Its parent must be writable. */
  dest: z.string().min(1),
  /** Overrides the revision in an `hf://` URI. */
  revision: z.string().min(1).optional(),
  /** relative path → sha256 hex, checked after download. */
  checksums: z.record(z.string(), z.string()).optional(),
  /** File list for an http source that has no SHA256SUMS. */
  files: z.array(z.string().min(1)).optional(),
  /** Hub endpoint (hf://) or S3 endpoint (s3://). */
  endpoint: z.url().optional(),
  /** Extra trusted CA certificates, PEM. */
  ca: z.string().optional(),
  hfToken: z.string().optional(),
  s3: z
    .object({
      region: z.string().optional(),
      credentials: z
        .object({
          accessKeyId: z.string(),
          secretAccessKey: z.string(),
          sessionToken: z.string().optional(),
        })
        .optional(),
    })
    .optional(),
  retry: z
    .object({
      attempts: z.int().min(1).max(20).optional(),
      baseDelayMs: z.number().min(0).optional(),
      maxDelayMs: z.number().min(0).optional(),
    })
    .optional(),
  /** Files downloaded at once. */
  concurrency: z.int().min(1).max(32).default(4),
  progressIntervalMs: z.number().min(0).default(500),
});

export type FetchOptionsData = z.input<typeof fetchOptionsSchema>;

export interface FetchHooks {
  onProgress?: (event: FetchProgressEvent) => void;
  logger?: FetchLogger;
  signal?: AbortSignal;
  /** Environment to read HF_TOKEN, HF_ENDPOINT, AWS_* and MODELGATE_FETCH_CA_FILE from. */
  env?: Readonly<Record<string, string | undefined>>;
  now?: () => number;
}

export type FetchOptions = FetchOptionsData & FetchHooks;

export function parseFetchOptions(data: unknown): z.output<typeof fetchOptionsSchema> {
  const parsed = fetchOptionsSchema.safeParse(data);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue?.path.join(".") || "options";
  throw new FetchError("invalid_fetch_options", `${where}: ${issue?.message ?? "invalid"}`);
}

export interface ResolvedSettings {
  endpoint: string | undefined;
  hfToken: string | undefined;
  region: string;
  caFile: string | undefined;
  retry: { attempts: number; baseDelayMs: number; maxDelayMs: number };
}

/**
 * Options win over the environment; the environment variables are the ones
 * the hub and AWS tools read, so a pod spec written for them works here.
 * Pure.
 */
export function resolveSettings(
  options: z.output<typeof fetchOptionsSchema>,
  uri: SourceUri,
  env: Readonly<Record<string, string | undefined>>,
): ResolvedSettings {
  const envEndpoint =
    uri.scheme === "hf"
      ? env.HF_ENDPOINT
      : uri.scheme === "s3"
        ? (env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL)
        : undefined;
  return {
    endpoint: options.endpoint ?? nonEmpty(envEndpoint),
    hfToken: options.hfToken ?? nonEmpty(env.HF_TOKEN),
    region:
      options.s3?.region ??
      nonEmpty(env.AWS_REGION) ??
      nonEmpty(env.AWS_DEFAULT_REGION) ??
      "us-east-1",
    caFile: nonEmpty(env.MODELGATE_FETCH_CA_FILE),
    retry: { ...DEFAULT_RETRY, ...stripUndefined(options.retry ?? {}) },
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
