import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";

/**
 * Reads the `.cpuprofile` the runtime child wrote (node --cpu-prof) and sums
 * self time per function and per area, so a miss against the bare loop can
 * be explained with numbers. Only the child's main JS thread is sampled:
 * onnxruntime-node 1.30 runs session.run synchronously on that thread, so
 * model time shows up as its `backend.js` frame. The profile spans the
 * child's whole life, model loading and start-up included.
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileLine {
  name: string;
  ms: number;
  share: number;
}

export interface ProfileSummary {
  file: string;
  wallMs: number;
  functions: ProfileLine[];
  areas: ProfileLine[];
}

function area(url: string, functionName: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (match) return match[1]!;
  if (url.startsWith("node:")) return "node internals";
  const own = /\/(runtime|api|lib|test)\/(.*?)[^/]*$/.exec(url);
  return own ? `${own[1]}/${own[2]}` : url;
}

function top(totals: Map<string, number>, all: number, count: number): ProfileLine[] {
  return [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, us]) => ({ name, ms: us / 1000, share: us / all }));
}

export async function summarizeProfiles(dir: string, count = 15): Promise<ProfileSummary[]> {
  // Names end in <pid>.<thread>.<seq>.cpuprofile; thread 0 is the main thread
  // (others are tsx's module loader and the like).
  const files = (await readdir(dir)).filter((f) => /\.0\.\d+\.cpuprofile$/.test(f));
  const summaries: ProfileSummary[] = [];
  for (const file of files) {
    const profile = JSON.parse(await readFile(join(dir, file), "utf8")) as CpuProfile;
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const functions = new Map<string, number>();
    const areas = new Map<string, number>();
    let all = 0;
    profile.samples.forEach((id, i) => {
      const node = byId.get(id);
      const delta = profile.timeDeltas[i] ?? 0;
      if (!node) return;
      const { functionName, url, lineNumber } = node.callFrame;
      const name =
        `${functionName || "(anonymous)"} ${url ? `${basename(url)}:${lineNumber + 1}` : ""}`.trim();
      functions.set(name, (functions.get(name) ?? 0) + delta);
      const key = area(url, functionName);
      areas.set(key, (areas.get(key) ?? 0) + delta);
      all += delta;
    });
    summaries.push({
      file: join(dir, file),
      wallMs: (profile.endTime - profile.startTime) / 1000,
      functions: top(functions, all, count),
      areas: top(areas, all, count),
    });
  }
  return summaries;
}
