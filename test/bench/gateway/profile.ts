import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * With `--profile`, the stand-in suite's gateway child runs with `--cpu-prof`;
 * this reads its main-thread profile and says where the busy time went. The
 * profile spans the child's whole life (start-up, idle gaps while direct
 * points run), so shares are of busy samples, idle left out. Two views:
 * self time per area (a package, node internals, one of our files), and
 * inclusive time per area and per function of ours, each sample counted
 * once per area on its stack, which answers "how much does logging, or the
 * outbox, cost in all". The sampler runs on wall time: on a machine busy
 * with other work, a function the thread was preempted in gets the time.
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const NOT_BUSY = new Set(["(idle)"]);

function areaOf(url: string, functionName: string, root: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (match) return match[1]!;
  if (url.startsWith("node:")) return "node internals";
  return url.startsWith(root) ? url.slice(root.length) : url;
}

function add(totals: Map<string, number>, key: string, us: number): void {
  totals.set(key, (totals.get(key) ?? 0) + us);
}

function top(title: string, totals: Map<string, number>, busyUs: number, count: number): string[] {
  return [
    `  ${title}:`,
    ...[...totals.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, count)
      .map(
        ([name, us]) =>
          `    ${((us / busyUs) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`,
      ),
  ];
}

export async function profileLines(dir: string, count = 15): Promise<string[]> {
  const root = `${pathToFileURL(process.cwd()).href}/`;
  // Names end in <pid>.<thread>.<seq>.cpuprofile; thread 0 is the main thread.
  const files = (await readdir(dir)).filter((f) => /\.0\.\d+\.cpuprofile$/.test(f));
  const lines: string[] = [];
  for (const file of files) {
    const profile = JSON.parse(await readFile(join(dir, file), "utf8")) as CpuProfile;
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parentOf = new Map<number, number>();
    for (const node of profile.nodes) for (const c of node.children ?? []) parentOf.set(c, node.id);
    const selfByArea = new Map<string, number>();
    const inclusiveByArea = new Map<string, number>();
    const inclusiveOwn = new Map<string, number>();
    let busyUs = 0;
    profile.samples.forEach((id, i) => {
      const node = byId.get(id);
      const us = profile.timeDeltas[i] ?? 0;
      if (!node || NOT_BUSY.has(node.callFrame.functionName)) return;
      busyUs += us;
      add(selfByArea, areaOf(node.callFrame.url, node.callFrame.functionName, root), us);
      const areas = new Set<string>();
      const own = new Set<string>();
      for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
        const { functionName, url, lineNumber } = byId.get(at)!.callFrame;
        if (functionName === "(root)") break;
        areas.add(areaOf(url, functionName, root));
        if (url.startsWith(root) && !url.includes("/node_modules/"))
          own.add(`${functionName || "(anonymous)"} ${basename(url)}:${lineNumber + 1}`);
      }
      for (const area of areas) add(inclusiveByArea, area, us);
      for (const name of own) add(inclusiveOwn, name, us);
    });
    const wallMs = (profile.endTime - profile.startTime) / 1000;
    lines.push(
      `profile of the gateway child, main thread: busy ${(busyUs / 1000).toFixed(0)} ms of ${wallMs.toFixed(0)} ms ` +
        `(shares below are of busy time) ${join(dir, file)}`,
      ...top("self time by area", selfByArea, busyUs, count),
      ...top("inclusive time by area", inclusiveByArea, busyUs, count),
      ...top("inclusive time by function of ours", inclusiveOwn, busyUs, count),
    );
  }
  return lines;
}
