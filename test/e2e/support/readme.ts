import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../support/cluster.js";

/**
 * The README's code blocks, for the tests that run or map its commands:
 * test/docs/readme-commands.test.ts checks every command is covered, and the
 * chart end-to-end test runs the "Call both routes" blocks as written.
 */
export const README_PATH = join(REPO_ROOT, "README.md");

export interface CodeBlock {
  /** The fence's language, e.g. `sh` or `yaml`. */
  lang: string;
  /** The nearest heading above the block, without its #s. */
  heading: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The block as written. */
  text: string;
}

export interface ShellBlock extends CodeBlock {
  /** Its commands: continuation lines joined, blank and comment lines dropped. */
  commands: string[];
}

export function readmeCodeBlocks(markdown = readFileSync(README_PATH, "utf8")): CodeBlock[] {
  const lines = markdown.split("\n");
  const blocks: CodeBlock[] = [];
  let heading = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const title = /^#{1,6} (.*)$/.exec(line);
    if (title) heading = title[1]!.trim();
    if (!line.startsWith("```")) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
    if (end < 0) throw new Error(`README line ${i + 1}: unclosed code fence`);
    const text = lines.slice(i + 1, end).join("\n");
    blocks.push({ lang: line.slice(3).trim(), heading, line: i + 1, text });
    // Skip the block, so that a `# comment` inside it is not taken for a heading.
    i = end;
  }
  return blocks;
}

export function readmeShellBlocks(markdown?: string): ShellBlock[] {
  return readmeCodeBlocks(markdown)
    .filter((b) => b.lang === "sh")
    .map((b) => ({ ...b, commands: commandsOf(b.text.split("\n")) }));
}

function commandsOf(body: string[]): string[] {
  const commands: string[] = [];
  let pending = "";
  for (const raw of body) {
    const line = raw.trim();
    if (pending === "" && (line === "" || line.startsWith("#"))) continue;
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    commands.push(`${pending}${line}`);
    pending = "";
  }
  if (pending !== "") commands.push(pending.trim());
  return commands;
}

/** The sh blocks under one heading, in order; fails when there are none. */
export function blocksUnder(heading: string): ShellBlock[] {
  const found = readmeShellBlocks().filter((b) => b.heading === heading);
  if (found.length === 0) throw new Error(`README has no sh block under "${heading}"`);
  return found;
}

/** The one block of a language under a heading. */
export function oneBlock(lang: string, heading: string): CodeBlock {
  const found = readmeCodeBlocks().filter((b) => b.lang === lang && b.heading === heading);
  if (found.length !== 1) {
    throw new Error(`README has ${found.length} ${lang} blocks under "${heading}", expected 1`);
  }
  return found[0]!;
}
