import { readFileSync } from "node:fs";

/**
 * A small Dockerfile reader for the image test: instructions with their
 * line continuations joined and comments dropped, grouped into stages, with
 * `${ARG}` references resolved from the ARG defaults.
 */
export interface Instruction {
  keyword: string;
  /** Everything after the keyword, continuations joined with a space. */
  args: string;
  /** `--from=build` and similar flags of COPY and ADD. */
  flags: Record<string, string>;
  /** For COPY and ADD: sources and destination, flags removed. */
  paths: string[];
}

export interface Stage {
  /** The image the stage starts from, ARG defaults substituted. */
  from: string;
  name?: string;
  instructions: Instruction[];
}

export interface Dockerfile {
  globalArgs: Record<string, string>;
  stages: Stage[];
}

export function readDockerfile(path: string): Dockerfile {
  const logical: string[] = [];
  let pending = "";
  for (const raw of readFileSync(path, "utf8").split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#") || (line === "" && pending === "")) continue;
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    logical.push(`${pending}${line}`.trim());
    pending = "";
  }
  if (pending) logical.push(pending.trim());

  const globalArgs: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const text of logical.filter((l) => l !== "")) {
    const [keyword = "", ...rest] = text.split(/\s+/);
    const args = rest.join(" ");
    const upper = keyword.toUpperCase();
    if (upper === "ARG" && stages.length === 0) {
      const [name = "", value = ""] = args.split("=", 2);
      globalArgs[name] = value;
      continue;
    }
    if (upper === "FROM") {
      const [image = "", as, name] = args.split(/\s+/);
      const from = image.replace(/\$\{(\w+)\}/g, (_, arg: string) => globalArgs[arg] ?? "");
      stages.push({ from, name: as?.toUpperCase() === "AS" ? name : undefined, instructions: [] });
      continue;
    }
    const flags: Record<string, string> = {};
    const paths: string[] = [];
    if (upper === "COPY" || upper === "ADD") {
      for (const word of rest) {
        const flag = /^--([a-z-]+)=(.*)$/.exec(word);
        if (flag) flags[flag[1]!] = flag[2]!;
        else paths.push(word);
      }
    }
    stages.at(-1)?.instructions.push({ keyword: upper, args, flags, paths });
  }
  return { globalArgs, stages };
}

/** The exec-form (JSON array) arguments of ENTRYPOINT or CMD. */
export function execForm(instruction: Instruction | undefined): string[] {
  if (!instruction) throw new Error("instruction missing");
  const parsed = JSON.parse(instruction.args) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === "string")) {
    throw new Error(`${instruction.keyword} is not in exec form: ${instruction.args}`);
  }
  return parsed;
}
