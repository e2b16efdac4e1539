// Where a decode step goes (issue "10."): the same step of an
// onnxruntime-genai decoder through onnxruntime-node (step-costs.ts) and
// through Python onnxruntime of the same release (step_costs.py), each in a
// child process, alternating in rounds so that the shared machine's drift
// lands on both. Run on its own:
//
//   npx tsx test/bench/runtime/step-profile.ts [--model FOLDER] [--threads N]
//       [--rounds N] [--pasts 64,576] [--batches 1,16]
//
// and by the full benchmark (the bound printed under a miss against llama.cpp).
import { execFile, spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { defaultIntraOpThreads } from "../../../runtime/engine/cpu-limit.js";
import { sharedModelsDir } from "../../support/shared-models.js";
import { SMOLLM_INT4 } from "./plan.js";
import { fmt, median } from "./stats.js";
import type { StepCosts } from "./step-costs.js";

export interface StepProfileOptions {
  folder: string;
  threads: number;
  rounds: number;
  pasts: number[];
  batches: number[];
  steps: number;
}

export interface StepProfile {
  batch: number;
  past: number;
  /** Median over rounds of each variant's median milliseconds. */
  node: Record<string, number>;
  python: Record<string, number> | null;
}

const HERE = fileURLToPath(new URL(".", import.meta.url));

export async function profileSteps(
  options: StepProfileOptions,
  log: (line: string) => void,
): Promise<StepProfile[]> {
  const genai = JSON.parse(await readFile(join(options.folder, "genai_config.json"), "utf8")) as {
    model: { decoder: { head_size: number; num_key_value_heads: number; filename: string } };
  };
  const decoder = genai.model.decoder;
  const python = await pythonOrNull(log);
  const samples = new Map<string, { node: StepCosts[]; python: StepCosts[] }>();
  for (let round = 0; round < options.rounds; round++) {
    for (const batch of options.batches) {
      const config = JSON.stringify({
        model: join(options.folder, decoder.filename),
        threads: options.threads,
        pasts: options.pasts,
        batch,
        steps: batch > 1 ? Math.max(5, Math.floor(options.steps / 4)) : options.steps,
        kvHeads: decoder.num_key_value_heads,
        headDim: decoder.head_size,
      });
      const order = round % 2 === 0 ? ["node", "python"] : ["python", "node"];
      for (const side of order) {
        if (side === "python" && !python) continue;
        const results =
          side === "node"
            ? await runJson(process.execPath, [
                "--import",
                "tsx",
                join(HERE, "step-costs.ts"),
                config,
              ])
            : await runJson(python!, [join(HERE, "step_costs.py"), config]);
        for (const r of results) {
          const key = `${r.batch}:${r.past}`;
          const entry = samples.get(key) ?? { node: [], python: [] };
          entry[side as "node" | "python"].push(r);
          samples.set(key, entry);
        }
      }
      log(`step profile: round ${round + 1}/${options.rounds}, batch ${batch} done`);
    }
  }
  return [...samples.entries()].map(([key, entry]) => {
    const [batch, past] = key.split(":").map(Number) as [number, number];
    return {
      batch,
      past,
      node: medians(entry.node),
      python: entry.python.length > 0 ? medians(entry.python) : null,
    };
  });
}

function medians(runs: StepCosts[]): Record<string, number> {
  const names = Object.keys(runs[0]?.ms ?? {});
  return Object.fromEntries(names.map((n) => [n, median(runs.map((r) => r.ms[n]!))]));
}

async function pythonOrNull(log: (line: string) => void): Promise<string | null> {
  try {
    const { stdout } = await promisify(execFile)("bash", [join(HERE, "python-venv.sh")]);
    return stdout.trim().split("\n").pop()!;
  } catch (error) {
    log(`step profile: no Python onnxruntime (${String(error).slice(0, 200)}); Node side only`);
    return null;
  }
}

function runJson(command: string, args: string[]): Promise<StepCosts[]> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (err += c.toString("utf8")));
    child.once("exit", (code) => {
      if (code !== 0)
        return reject(new Error(`${command} exited with ${code}: ${err.slice(-800)}`));
      try {
        resolvePromise(JSON.parse(out.trim().split("\n").pop()!) as StepCosts[]);
      } catch (error) {
        reject(new Error(`${command} printed ${out.slice(0, 300)}`, { cause: error }));
      }
    });
  });
}

/** Lines that say what each part of a step costs, Node against Python. */
export function stepProfileLines(profiles: readonly StepProfile[]): string[] {
  const lines = [
    "decode step, median ms (Node: onnxruntime-node 1.30; Python: onnxruntime 1.30, same library and options)",
  ];
  for (const p of profiles) {
    const n = p.node;
    const py = p.python;
    const floor = py ? Math.min(py.ortvalues!, py.logits!) : Number.NaN;
    const sharedGap = py ? n["shared capacity past+1"]! - py.shared! : Number.NaN;
    lines.push(
      `  batch ${String(p.batch).padStart(2)}, past ${String(p.past).padStart(4)}: ` +
        `Node all outputs ${fmt(n.all!)}, logits only ${fmt(n.logits!)}, shared buffer ` +
        `${fmt(n["shared capacity past+1"]!)} (capacity +64: ${fmt(n["shared capacity past+64"]!)})` +
        (py
          ? `; Python all ${fmt(py.all!)}, logits only ${fmt(py.logits!)}, OrtValues ${fmt(py.ortvalues!)}, ` +
            `shared buffer ${fmt(py.shared!)}`
          : ""),
    );
    lines.push(
      `      Node's shared buffer over Python's ${fmt(sharedGap)} ms; ` +
        `Node's copies of the present outputs ${fmt(n.all! - n.logits!)} ms; Node with logits ` +
        `only over Python's engine ${fmt(n.logits! - floor)} ms; setImmediate hop ${fmt(n.hop! * 1000)} µs, ` +
        `input tensors ${fmt(n.feeds! * 1000)} µs, argmax ${fmt(n.argmax! * 1000)} µs` +
        (py ? ` (numpy ${fmt(py.argmax! * 1000)} µs)` : ""),
    );
  }
  return lines;
}

function flag(args: readonly string[], name: string): string | undefined {
  const index = args.indexOf(name);
  return index >= 0 ? args[index + 1] : undefined;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const list = (value: string | undefined, fallback: number[]) =>
    value ? value.split(",").map(Number) : fallback;
  const options: StepProfileOptions = {
    folder: flag(args, "--model") ?? join(sharedModelsDir(), SMOLLM_INT4),
    threads: Number(flag(args, "--threads") ?? defaultIntraOpThreads()),
    rounds: Number(flag(args, "--rounds") ?? 3),
    pasts: list(flag(args, "--pasts"), [64, 576]),
    batches: list(flag(args, "--batches"), [1, 16]),
    steps: 30,
  };
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const profiles = await profileSteps(options, log);
  process.stdout.write(`\n${stepProfileLines(profiles).join("\n")}\n`);
}
