import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { RUNTIME_UID } from "../../operator/children/deployment.js";
import { REPO_ROOT } from "../support/cluster.js";
import { execForm, readDockerfile, type Instruction, type Stage } from "./dockerfile-parse.js";

/**
 * What can be checked of the image without a container engine: the stages,
 * that every COPY source exists once `npm run build` has run, that the
 * ENTRYPOINT's script is where the build puts it and runs, that the final
 * stage is non-root and carries no npm or build tools.
 */
const run = promisify(execFile);
const dockerfile = readDockerfile(join(REPO_ROOT, "Dockerfile"));
const [build, final] = dockerfile.stages as [Stage, Stage];
const of = (stage: Stage, keyword: string): Instruction[] =>
  stage.instructions.filter((i) => i.keyword === keyword);
const workdir = (stage: Stage): string => of(stage, "WORKDIR").at(-1)!.args;
const tsconfigBuild = JSON.parse(readFileSync(join(REPO_ROOT, "tsconfig.build.json"), "utf8")) as {
  include: string[];
};

/**
 * The compiled output: dist/ when it is newer than every source file (CI runs
 * `npm run build` first), else a fresh build into .tmp/ so that a stale dist/
 * never hides a broken entry point. Either way inside the repository, so that
 * node_modules resolves as it does under /app in the image.
 */
let distDir: string;
beforeAll(() => {
  const newestSource = Math.max(
    ...tsconfigBuild.include.flatMap((dir) => sourceTimes(join(REPO_ROOT, dir))),
  );
  const candidates = [join(REPO_ROOT, "dist"), join(REPO_ROOT, ".tmp", "image-test", "dist")];
  const fresh = candidates.find((dir) => {
    const entry = join(dir, "cli", "modelgate.js");
    return existsSync(entry) && statSync(entry).mtimeMs >= newestSource;
  });
  if (fresh) {
    distDir = fresh;
    return;
  }
  distDir = candidates[1]!;
  mkdirSync(distDir, { recursive: true });
  execFileSync(
    join(REPO_ROOT, "node_modules", ".bin", "tsc"),
    ["-p", "tsconfig.build.json", "--outDir", distDir],
    { cwd: REPO_ROOT, stdio: "inherit" },
  );
}, 120_000);

function sourceTimes(dir: string): number[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => statSync(join(e.parentPath, e.name)).mtimeMs);
}

/** A path of the build stage's /app as a path of this checkout (dist/ as built above). */
function checkoutPath(imagePath: string): string {
  const inApp = relative(workdir(build), imagePath);
  if (inApp === "dist" || inApp.startsWith("dist/")) return join(distDir, inApp.slice(5));
  return join(REPO_ROOT, inApp);
}

describe("Dockerfile", () => {
  it("builds on Node and ships on a distroless nonroot Node image", () => {
    expect(dockerfile.stages).toHaveLength(2);
    expect(build.name).toBe("build");
    expect(build.from).toMatch(/^node:\d+-bookworm-slim$/);
    expect(final.from).toMatch(/^gcr\.io\/distroless\/nodejs\d+-debian12:nonroot$/);
    // Build and run on the same Node major, the one package.json's engines names.
    const major = /^node:(\d+)/.exec(build.from)![1]!;
    expect(final.from).toContain(`nodejs${major}-`);
    const engines = (
      JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
        engines: { node: string };
      }
    ).engines.node;
    expect(engines).toBe(`>=${major}`);
  });

  it("installs without onnxruntime's download, builds, then drops dev dependencies", () => {
    const env = of(build, "ENV")
      .map((i) => i.args)
      .join(" ");
    expect(env).toContain("ONNXRUNTIME_NODE_INSTALL=skip");
    const runs = of(build, "RUN").map((i) => i.args);
    const at = (command: string) => runs.findIndex((r) => r.includes(command));
    expect(at("npm ci")).toBeGreaterThanOrEqual(0);
    expect(at("npm run build")).toBeGreaterThan(at("npm ci"));
    expect(at("npm prune --omit=dev")).toBeGreaterThan(at("npm run build"));
    // onnxruntime-node stays (a production dependency) with this platform's CPU library.
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
    };
    expect(pkg.dependencies["onnxruntime-node"]).toBeDefined();
    expect(runs[at("npm prune")]).toContain('test -f "$dir/linux/${ORT_ARCH}/libonnxruntime.so.1"');
    const ortBin = join(REPO_ROOT, "node_modules", "onnxruntime-node", "bin");
    const napi = readdirSync(ortBin).filter((d) => d.startsWith("napi-v"));
    expect(napi.length).toBeGreaterThan(0);
    for (const dir of napi) {
      expect(existsSync(join(ortBin, dir, "linux", "x64", "libonnxruntime.so.1"))).toBe(true);
      expect(existsSync(join(ortBin, dir, "linux", "x64", "onnxruntime_binding.node"))).toBe(true);
    }
  });

  it("copies into the build stage only files that exist and that .dockerignore lets through", () => {
    const ignored = readFileSync(join(REPO_ROOT, ".dockerignore"), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    const sources = of(build, "COPY").flatMap((i) => {
      expect(i.flags.from).toBeUndefined();
      return i.paths.slice(0, -1);
    });
    for (const source of sources) {
      expect(existsSync(join(REPO_ROOT, source)), source).toBe(true);
      expect(ignored, source).not.toContain(source);
    }
    // Every folder the build compiles is copied in, or `npm run build` fails in the image.
    for (const dir of tsconfigBuild.include) expect(sources).toContain(dir);
    for (const file of ["package.json", "package-lock.json", "tsconfig.build.json"]) {
      expect(sources).toContain(file);
    }
    for (const entry of ["**/node_modules", "dist", ".git", "test"])
      expect(ignored).toContain(entry);
  });

  it("copies into the final stage only the pruned app, from paths the build produces", () => {
    expect(of(final, "RUN")).toEqual([]);
    const copies = of(final, "COPY");
    for (const copy of copies) {
      expect(copy.flags.from, copy.args).toBe("build");
      const [source] = copy.paths as [string];
      if (source.startsWith(`${workdir(build)}/`)) {
        expect(existsSync(checkoutPath(source)), source).toBe(true);
      } else {
        // Made by a RUN of the build stage (the `modelgate` command).
        expect(
          of(build, "RUN").some((r) => r.args.includes(source)),
          source,
        ).toBe(true);
      }
      expect(source, "no npm, npx, corepack or compiler").not.toMatch(
        /npm|npx|corepack|\/usr\/(local\/)?(bin|lib)\/?$|gcc|make|python/,
      );
    }
    expect(copies.map((c) => c.paths[0]).sort()).toEqual([
      "/app/dist",
      "/app/node_modules",
      "/app/package.json",
      "/out/bin/modelgate",
    ]);
  });

  it("runs as the numeric nonroot user the operator and the chart assume", () => {
    const user = of(final, "USER").at(-1)!.args;
    expect(user).toMatch(/^\d+(:\d+)?$/);
    const [uid, gid] = user.split(":").map(Number);
    expect(uid).toBeGreaterThan(0);
    expect(uid).toBe(RUNTIME_UID);
    expect(gid).toBe(RUNTIME_UID);
    const values = readFileSync(join(REPO_ROOT, "charts", "modelgate", "values.yaml"), "utf8");
    expect(values.match(/runAsUser: (\d+)/g)).toEqual([
      `runAsUser: ${RUNTIME_UID}`,
      `runAsUser: ${RUNTIME_UID}`,
    ]);
  });
});

describe("the image's entry point", () => {
  const entrypoint = execForm(of(final, "ENTRYPOINT").at(-1));
  const script = (): string => checkoutPath(entrypoint[1]!);
  const modelgate = async (...args: string[]) =>
    (await run(process.execPath, [script(), ...args], { cwd: REPO_ROOT })).stdout;

  it("is node running dist/cli/modelgate.js from the WORKDIR", () => {
    expect(entrypoint).toEqual(["/nodejs/bin/node", `${workdir(final)}/dist/cli/modelgate.js`]);
    expect(workdir(final)).toBe(workdir(build));
    expect(existsSync(script())).toBe(true);
  });

  it("answers --help with every role of the image", async () => {
    const help = await modelgate("--help");
    for (const command of ["gateway", "operator", "runtime"]) expect(help).toContain(command);
    expect(await modelgate("gateway", "--help")).toContain("--keys-file");
    expect(await modelgate("operator", "--help")).toContain("--runtime-image");
    expect(await modelgate("runtime", "serve", "--help")).toContain("--model-path");
    expect(await modelgate("runtime", "fetch", "--help")).toContain("--source");
  });

  it("is also `modelgate` on PATH, for pods that set command: [modelgate]", async () => {
    const make = of(build, "RUN").find((r) => r.args.includes("/out/bin/modelgate"))!.args;
    const body = /printf '([^']*)'/.exec(make)![1]!.replaceAll("\\n", "\n");
    // A shebang on node itself (no shell or /usr/bin/env in distroless) and the entry script.
    expect(body.split("\n")[0]).toBe(`#!${entrypoint[0]}`);
    expect(body).toContain(`import("${entrypoint[1]}")`);
    // The same file, pointed at this checkout, runs as the image would run it.
    const local = join(REPO_ROOT, ".tmp", "image-test", "modelgate");
    mkdirSync(join(REPO_ROOT, ".tmp", "image-test"), { recursive: true });
    writeFileSync(
      local,
      body.replace(entrypoint[0]!, process.execPath).replace(entrypoint[1]!, script()),
      { mode: 0o755 },
    );
    const { stdout } = await run(local, ["gateway", "--help"]);
    expect(stdout).toContain("Usage: modelgate gateway");
  });
});
