import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { FetchPlan } from "./plan.js";
import { MARKER_FILE } from "./safe-path.js";

/**
 * `.modelgate-fetch.json`: written last into staging, so a destination that
 * has it was renamed into place complete. It is also what lets a second
 * fetch of the same model return at once.
 */
export const markerSchema = z.object({
  version: z.literal(1),
  source: z.string(),
  revision: z.string().optional(),
  files: z.array(z.object({ path: z.string(), size: z.number().int(), sha256: z.string() })),
  fetchedAt: z.string(),
});

export type FetchMarker = z.infer<typeof markerSchema>;
export type FetchedFile = FetchMarker["files"][number];

export function buildMarker(
  plan: FetchPlan,
  files: readonly FetchedFile[],
  now: Date,
): FetchMarker {
  return {
    version: 1,
    source: plan.source,
    ...(plan.revision === undefined ? {} : { revision: plan.revision }),
    files: [...files].sort((a, b) => (a.path < b.path ? -1 : 1)),
    fetchedAt: now.toISOString(),
  };
}

/**
 * Whether `marker` records exactly the model `plan` describes: same source,
 * same revision, same file names, and sizes and digests that agree wherever
 * the plan knows them. Pure.
 */
export function markerMatchesPlan(marker: FetchMarker, plan: FetchPlan): boolean {
  if (marker.source !== plan.source || marker.revision !== plan.revision) return false;
  if (marker.files.length !== plan.files.length) return false;
  const recorded = new Map(marker.files.map((f) => [f.path, f]));
  return plan.files.every((want) => {
    const have = recorded.get(want.path);
    if (!have) return false;
    if (want.size !== undefined && want.size !== have.size) return false;
    return want.sha256 === undefined || want.sha256 === have.sha256;
  });
}

/** Reads a marker; a missing or unreadable one is simply "no marker". */
export async function readMarker(dir: string): Promise<FetchMarker | undefined> {
  try {
    const parsed = markerSchema.safeParse(
      JSON.parse(await readFile(join(dir, MARKER_FILE), "utf8")),
    );
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** A cheap check that the files the marker lists are still there, at their sizes. */
export async function markerFilesPresent(dir: string, marker: FetchMarker): Promise<boolean> {
  for (const file of marker.files) {
    const info = await stat(join(dir, ...file.path.split("/"))).catch(() => undefined);
    if (!info?.isFile() || info.size !== file.size) return false;
  }
  return true;
}

export async function writeMarker(dir: string, marker: FetchMarker): Promise<void> {
  await writeFile(join(dir, MARKER_FILE), `${JSON.stringify(marker, null, 2)}\n`);
}
