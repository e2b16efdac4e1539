import { execFile } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse, parseAllDocuments, stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { autoscalingSchema } from "../../crds/inference-model.js";
import { verifyPaySignature } from "../../gateway/pay/signature.js";
import { toolsDir } from "../chart/chart-support.js";
import { REPO_ROOT } from "../support/cluster.js";
import { oneBlock, readmeShellBlocks } from "../e2e/support/readme.js";

/**
 * "Every command in the README is run by a test or by .ci/run." Each command
 * of its ```sh blocks must match one entry of COVERAGE, which names the files
 * that run it and what each must contain (the command's essential part, as
 * that file runs it). A new README command without an entry fails here. The
 * commands that are cheap and safe are also run for real below.
 */
const run = promisify(execFile);

interface Coverage {
  /** The README commands this entry covers: those starting with it. */
  command: string;
  /** [file, ...strings it must contain]: the files that run the command. */
  runBy: Array<[file: string, ...evidence: string[]]>;
  /** Set for a command no test can run here, saying why; runBy then names what checks it. */
  notRun?: string;
}

const SELF = "test/docs/readme-commands.test.ts";
const E2E = "test/e2e/chart-e2e.test.ts";
const CI = ".ci/run";
const NO_CONTAINER_ENGINE = "needs Docker or Podman (and kind); the CI machines have neither";

const COVERAGE: Coverage[] = [
  {
    command: "npm ci && npm run dev",
    runBy: [
      [CI, "npm ci"],
      ["test/dev/dev-command.test.ts", "generateFixtures()", "startDev("],
      ["test/support/dev-process.ts", '"cli/modelgate.ts",', '"dev",', '"--port",'],
      ["package.json", '"dev": "npm run fixtures && tsx cli/modelgate.ts dev"'],
    ],
  },
  { command: "npm test", runBy: [[CI, "npm test"]] },
  {
    command: "docker build -t registry.example.com/modelgate:0.1.0 .",
    notRun: NO_CONTAINER_ENGINE,
    runBy: [["test/image/dockerfile.test.ts", 'readDockerfile(join(REPO_ROOT, "Dockerfile"))']],
  },
  {
    command: "docker push registry.example.com/modelgate:0.1.0",
    notRun: `${NO_CONTAINER_ENGINE}, and a registry to push to`,
    runBy: [],
  },
  {
    command: "npm run modelgate -- keys create --account acme --project web",
    runBy: [[SELF, "keys create"]],
  },
  {
    command: "helm install modelgate charts/modelgate -n modelgate --create-namespace",
    runBy: [
      [E2E, '"install"', "CHART_DIR", '"--values"'],
      // As `helm template` with the README's values, below.
      [SELF, '"template"'],
    ],
  },
  {
    command: "kubectl apply -n modelgate -f charts/modelgate/examples/",
    runBy: [[E2E, '"apply", "-n", modelNs, "-f", "-"', '"examples"']],
  },
  {
    command: "kubectl get inferencemodels -n modelgate",
    runBy: [[E2E, '"get", "inferencemodels", "-n", modelNs']],
  },
  {
    command: "curl -s $GATEWAY/v1/responses",
    runBy: [[E2E, 'blocksUnder("Call both routes")', "GATEWAY: gateway!.url", "KEY: key.key"]],
  },
  { command: "BODY=", runBy: [[E2E, 'blocksUnder("Call both routes")']] },
  {
    command: "SIG=$(npm run -s modelgate -- pay sign",
    runBy: [
      [E2E, 'blocksUnder("Call both routes")', "PAY_KID: KID", "PAY_SECRET_FILE"],
      [SELF, "verifyPaySignature"],
    ],
  },
  {
    command: "curl -s -i $GATEWAY/pay/v1/responses",
    runBy: [[E2E, 'blocksUnder("Call both routes")', "pay-usage"]],
  },
  {
    command: "kubectl apply --server-side -f charts/modelgate/crds/",
    // A server-side dry run: the test cluster is shared (see the e2e's comment).
    runBy: [[E2E, '"--server-side"', '"--dry-run=server"', 'join(CHART_DIR, "crds")']],
  },
  {
    command: "test/cluster/kind/kind-up.sh",
    notRun: NO_CONTAINER_ENGINE,
    // Parsed by `bash -n` below; running it would replace the shared cluster's kubeconfig.
    runBy: [[SELF, '"-n", "test/cluster/kind/kind-up.sh"']],
  },
  {
    command: "kind load docker-image registry.example.com/modelgate:0.1.0 --name modelgate",
    notRun: NO_CONTAINER_ENGINE,
    runBy: [],
  },
  { command: "source test/cluster/env.sh", runBy: [[SELF, "source test/cluster/env.sh"]] },
  {
    command: "export MODELGATE_BASE_URL=$GATEWAY MODELGATE_API_KEY=$KEY",
    runBy: [
      [
        "test/gateway/batch/batch-cli.test.ts",
        "MODELGATE_BASE_URL: p.url",
        "MODELGATE_API_KEY: key",
      ],
    ],
  },
  {
    command: "ID=$(npm run -s modelgate -- batch submit",
    runBy: [["test/gateway/batch/batch-cli.test.ts", '"batch", ...args', 'modelgate(["submit"']],
  },
  {
    command: "npm run -s modelgate -- batch watch",
    runBy: [["test/gateway/batch/batch-cli.test.ts", '"batch", ...args', 'modelgate(["watch"']],
  },
  {
    command: "npm run -s modelgate -- batch results",
    runBy: [
      [
        "test/gateway/batch/batch-cli.test.ts",
        '"batch", ...args',
        'modelgate(["results"',
        '"--out"',
      ],
    ],
  },
  { command: "npm run format:check", runBy: [[CI, "npm run format:check"]] },
  { command: "npm run lint", runBy: [[CI, "npm run lint"]] },
  { command: "npm run typecheck", runBy: [[CI, "npm run typecheck"]] },
  { command: "npm run build", runBy: [[CI, "npm run build"]] },
  { command: "test/cluster/up.sh", runBy: [[CI, "test/cluster/up.sh"]] },
  // CI runs each benchmark with --quick: the same program, a shorter run.
  { command: "npm run bench:runtime", runBy: [[CI, "npm run bench:runtime -- --quick"]] },
  { command: "npm run bench:gateway", runBy: [[CI, "npm run bench:gateway -- --quick"]] },
  { command: "npm run bench:operator", runBy: [[CI, "npm run bench:operator -- --quick"]] },
  { command: "npm run bench:extract", runBy: [[CI, "npm run bench:extract -- --quick"]] },
  { command: "npm run bench:prefix", runBy: [[CI, "npm run bench:prefix -- --quick"]] },
  { command: "npm run bench:streaming", runBy: [[CI, "npm run bench:streaming -- --quick"]] },
  { command: "npm run bench:batch", runBy: [[CI, "npm run bench:batch -- --quick"]] },
  // `npm test` runs the fuzz file with its defaults; the README's variables
  // only change which paths, for how long and from which seed.
  {
    command: "MODELGATE_FUZZ_PATHS=",
    runBy: [
      [CI, "npm test"],
      [
        "test/fuzz/schemathesis.test.ts",
        "process.env.MODELGATE_FUZZ_PATHS",
        "process.env.MODELGATE_FUZZ_SECONDS",
        "process.env.MODELGATE_FUZZ_SEED",
      ],
    ],
  },
  // The CI entry point itself: what a CI job runs on a clean clone.
  { command: "bash .ci/run", runBy: [[CI, "npm ci", "npm test"]] },
];

const commands = readmeShellBlocks().flatMap((b) =>
  b.commands.map((command) => ({ command, where: `README.md:${b.line} (${b.heading})` })),
);
const coverageOf = (command: string) => COVERAGE.filter((c) => command.startsWith(c.command));

describe("README commands", () => {
  it("has commands to check", () => {
    expect(commands.length).toBeGreaterThan(20);
  });

  it("maps every command to exactly one coverage entry", () => {
    const unmapped = commands
      .filter(({ command }) => coverageOf(command).length !== 1)
      .map(({ command, where }) => `${where}: ${command} (${coverageOf(command).length} entries)`);
    expect(unmapped).toEqual([]);
  });

  it("has no coverage entry without a README command", () => {
    const stale = COVERAGE.filter(
      (c) => !commands.some(({ command }) => command.startsWith(c.command)),
    );
    expect(stale.map((c) => c.command)).toEqual([]);
  });

  it("names files that exist and contain what runs the command", () => {
    const missing: string[] = [];
    for (const entry of COVERAGE) {
      if (entry.runBy.length === 0 && !entry.notRun) missing.push(`${entry.command}: no runBy`);
      for (const [file, ...evidence] of entry.runBy) {
        const path = join(REPO_ROOT, file);
        if (!existsSync(path)) {
          missing.push(`${entry.command}: ${file} does not exist`);
          continue;
        }
        const text = readFileSync(path, "utf8");
        for (const part of evidence) {
          if (!text.includes(part)) missing.push(`${entry.command}: ${file} lacks ${part}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it("leaves unrun only the commands that need a container engine", () => {
    expect(COVERAGE.filter((c) => c.notRun).map((c) => c.command.split(" ")[0])).toEqual([
      "docker",
      "docker",
      "test/cluster/kind/kind-up.sh",
      "kind",
    ]);
  });
});

describe("README commands run for real", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "readme-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const command = (start: string): string => {
    const found = commands.find((c) => c.command.startsWith(start));
    if (!found) throw new Error(`README has no command starting with ${start}`);
    return found.command;
  };
  const bash = async (script: string, env: Record<string, string> = {}) =>
    (
      await run("bash", ["-euo", "pipefail", "-c", script], {
        cwd: REPO_ROOT,
        env: { ...process.env, ...env },
      })
    ).stdout;

  /** `keys create` as written: the key once, and the entry for the keys file. */
  async function createKey(): Promise<{ key: string; entry: Record<string, unknown> }> {
    const out = await bash(command("npm run modelgate -- keys create"));
    const key = /^ {2}(mg_live_[0-9A-Za-z]{38})$/m.exec(out)?.[1];
    const entryText = out.slice(out.indexOf("  - id: "));
    const [entry] = parse(entryText) as Array<Record<string, unknown>>;
    expect(key).toBeDefined();
    return { key: key!, entry: entry! };
  }

  it("keys create prints a key and an entry for the account and project", async () => {
    const { entry } = await createKey();
    expect(entry).toMatchObject({ account: "acme", projects: ["web"] });
    expect(entry.hash).toMatch(/^sha256:[0-9a-f]{64}$/);
  }, 30_000);

  it("helm install with the README's values renders (as helm template), with a fresh key", async () => {
    const { entry } = await createKey();
    // The README's values with its example key entry replaced by the fresh one,
    // as the README tells a user to do.
    const values = parse(oneBlock("yaml", "Values").text) as {
      gateway: { apiKeys: { keys: Array<Record<string, unknown>> } };
    };
    expect(values.gateway.apiKeys.keys).toHaveLength(1);
    values.gateway.apiKeys.keys = [{ ...values.gateway.apiKeys.keys[0], ...entry }];
    delete values.gateway.apiKeys.keys[0]!.created;
    const valuesFile = join(dir, "my-values.yaml");
    await writeFile(valuesFile, stringify(values));

    const install = command("helm install modelgate charts/modelgate");
    expect(install).toContain("-f my-values.yaml");
    const template = install
      .replace(/^helm install /, `"${join(toolsDir(), "helm")}" "template" `)
      .replace("-f my-values.yaml", `-f "${valuesFile}"`);
    const objects = parseAllDocuments(await bash(template)).map(
      (d) => d.toJS() as { kind: string; metadata: { name: string }; stringData?: object } | null,
    );
    const byName = (kind: string, name: string) =>
      objects.find((o) => o?.kind === kind && o.metadata.name === name);
    const keys = byName("Secret", "modelgate-gateway-keys");
    expect(JSON.stringify(keys?.stringData)).toContain(String(entry.hash));
    expect(byName("Secret", "modelgate-gateway-pay")).toBeDefined();
    expect(JSON.stringify(byName("Deployment", "modelgate-gateway"))).toContain(
      '"image":"registry.example.com/modelgate:0.1.0"',
    );
  }, 60_000);

  it("pay sign as written makes a signature the gateway's check accepts", async () => {
    const secretFile = join(dir, "pay-secret");
    const secret = "a-signing-secret-of-the-readme";
    await writeFile(secretFile, `${secret}\n`);
    const [bodyLine, sigLine] = [command("BODY="), command("SIG=$(")];
    const out = await bash(`${bodyLine}\n${sigLine}\nprintf '%s\\n%s' "$BODY" "$SIG"`, {
      PAY_KID: "kid-2026-11",
      PAY_SECRET_FILE: secretFile,
    });
    const [body, header] = out.split("\n") as [string, string];
    expect(JSON.parse(body)).toMatchObject({ model: "smollm2-135m-instruct" });
    const verdict = verifyPaySignature({
      header,
      rawBody: Buffer.from(body),
      secrets: new Map([["kid-2026-11", [secret]]]),
      nowSeconds: Math.floor(Date.now() / 1000),
    });
    expect(verdict).toMatchObject({ ok: true, kid: "kid-2026-11" });
  }, 30_000);

  it("source test/cluster/env.sh puts the cluster's tools on PATH", async () => {
    const out = await bash(`${command("source test/cluster/env.sh")}\ncommand -v kubectl helm`);
    expect(out.split("\n").filter(Boolean)).toEqual([
      join(toolsDir(), "kubectl"),
      join(toolsDir(), "helm"),
    ]);
  });

  it("kind-up.sh parses (it cannot run here: it needs a container engine)", async () => {
    await run("bash", ["-n", "test/cluster/kind/kind-up.sh"], { cwd: REPO_ROOT });
  });
});

describe("README reference material", () => {
  it("names only metrics the source defines", () => {
    const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
    const named = [...new Set(readme.match(/\bmodelgate_[a-z_]+\b/g))];
    const source = ["gateway", "operator", "runtime"]
      .flatMap((dir) =>
        readdirSync(join(REPO_ROOT, dir), { recursive: true, withFileTypes: true })
          .filter((e) => e.isFile() && e.name.endsWith(".ts"))
          .map((e) => readFileSync(join(e.parentPath, e.name), "utf8")),
      )
      .join("\n");
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter((name) => !source.includes(`"${name}"`))).toEqual([]);
  });

  it("shows an autoscaling spec the InferenceModel schema accepts", () => {
    const block = parse(oneBlock("yaml", "Autoscaling").text) as { spec: { autoscaling: unknown } };
    expect(autoscalingSchema.safeParse(block.spec.autoscaling).success).toBe(true);
  });

  it("shows metrics values that render the ServiceMonitors and the dashboard", async () => {
    const dir = await mkdtemp(join(tmpdir(), "readme-metrics-"));
    try {
      const file = join(dir, "metrics.yaml");
      await writeFile(file, oneBlock("yaml", "Metrics").text);
      const { stdout } = await run(
        join(toolsDir(), "helm"),
        ["template", "modelgate", "charts/modelgate", "-f", file],
        { cwd: REPO_ROOT },
      );
      const kinds = parseAllDocuments(stdout).map((d) => (d.toJS() as { kind?: string })?.kind);
      expect(kinds.filter((k) => k === "ServiceMonitor")).toHaveLength(3);
      expect(kinds).toContain("ConfigMap");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
