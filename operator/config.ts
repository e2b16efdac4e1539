import { hostname } from "node:os";
import { z } from "zod";
import { parseSettings } from "../lib/settings.js";

/**
 * `modelgate operator` settings: flags, then MODELGATE_* variables, then
 * defaults (lib/settings.ts). The lease timings are those of client-go's
 * leader election (15 s / 10 s / 2 s).
 */
const seconds = z.coerce.number().positive();

export const operatorConfigSchema = z
  .object({
    kubeconfig: z.string().min(1).optional(),
    watchNamespace: z.string().min(1).optional(),
    runtimeImage: z.string().min(1, "the image of the model pods is required"),
    runtimeImagePullPolicy: z.enum(["IfNotPresent", "Always", "Never"]).default("IfNotPresent"),
    leaderElect: z
      .union([z.boolean(), z.enum(["true", "false"]).transform((v) => v === "true")])
      .default(true),
    leaseName: z.string().min(1).default("modelgate-operator"),
    leaseNamespace: z.string().min(1).optional(),
    leaseDurationSeconds: seconds.default(15),
    renewDeadlineSeconds: seconds.default(10),
    retryPeriodSeconds: seconds.default(2),
    identity: z.string().min(1).optional(),
    host: z.string().default("0.0.0.0"),
    port: z.coerce.number().int().min(0).max(65535).default(8081),
    workers: z.coerce.number().int().min(1).max(64).default(4),
    logLevel: z.string().default("info"),
  })
  .refine((c) => c.renewDeadlineSeconds < c.leaseDurationSeconds, {
    message: "renewDeadlineSeconds must be shorter than leaseDurationSeconds",
    path: ["renewDeadlineSeconds"],
  });

export type OperatorConfig = z.infer<typeof operatorConfigSchema>;

export function parseOperatorConfig(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): OperatorConfig {
  return parseSettings(
    operatorConfigSchema as unknown as z.ZodObject,
    flags,
    env,
  ) as OperatorConfig;
}

/** Who holds the Lease: the pod's name (downward API), else the host name, plus the pid. */
export function identityOf(config: OperatorConfig, env: NodeJS.ProcessEnv): string {
  return config.identity ?? `${env.POD_NAME ?? hostname()}_${process.pid}`;
}

/** The Lease's namespace: the flag, else the pod's own namespace, else "default". */
export function leaseNamespaceOf(config: OperatorConfig, env: NodeJS.ProcessEnv): string {
  return config.leaseNamespace ?? env.POD_NAMESPACE ?? "default";
}
