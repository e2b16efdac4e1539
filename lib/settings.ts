import type { z } from "zod";

/**
 * Settings of a command: flags first, then MODELGATE_* variables (what a pod
 * spec sets), then the schema's defaults, parsed once with zod so a bad value
 * stops start-up with the setting's flag and variable in the message.
 */
export function envName(key: string): string {
  return `MODELGATE_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

export function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

export function parseSettings<S extends z.ZodObject>(
  schema: S,
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): z.infer<S> {
  const merged: Record<string, unknown> = {};
  for (const key of Object.keys(schema.shape)) merged[key] = flags[key] ?? env[envName(key)];
  const parsed = schema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path[0] ?? "");
    throw new Error(
      `invalid setting ${key} (${flagName(key)} / ${envName(key)}): ${issue.message}`,
    );
  }
  return parsed.data;
}
