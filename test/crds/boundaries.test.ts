import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/cluster.js";

/**
 * The components meet only through their contracts: `crds/` (the
 * InferenceModel: schema, child names, the runtime's port name, the source
 * URI grammar), `api/` (the wire) and `lib/`. A component that imports
 * another's internals couples their releases and their tests; this guards
 * the moves that put those contracts in their homes.
 */
const COMPONENTS = ["gateway", "operator", "runtime"] as const;
const CONTRACTS = new Set(["crds", "api", "lib"]);

function sourceFiles(dir: string): string[] {
  return readdirSync(join(REPO_ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => join(e.parentPath, e.name));
}

/** The top-level folder of every relative import (static or dynamic) of a file. */
function importedFolders(file: string): { specifier: string; folder: string }[] {
  const text = readFileSync(file, "utf8");
  const found: { specifier: string; folder: string }[] = [];
  for (const match of text.matchAll(/(?:from\s+|import\s*\(\s*)"(\.{1,2}\/[^"]+)"/g)) {
    const specifier = match[1]!;
    const target = relative(REPO_ROOT, resolve(dirname(file), specifier));
    found.push({ specifier, folder: target.split(/[\\/]/)[0]! });
  }
  return found;
}

function crossings(dir: string, allowed: (folder: string) => boolean): string[] {
  return sourceFiles(dir).flatMap((file) =>
    importedFolders(file)
      .filter(({ folder }) => !allowed(folder))
      .map(({ specifier }) => `${relative(REPO_ROOT, file)} imports ${specifier}`),
  );
}

describe("component boundaries", () => {
  it.each(COMPONENTS)("%s imports no other component, only crds/, api/ and lib/", (component) => {
    expect(crossings(component, (f) => f === component || CONTRACTS.has(f))).toEqual([]);
  });

  it("crds/ (the InferenceModel contract) imports no component", () => {
    expect(crossings("crds", (f) => f === "crds" || f === "lib")).toEqual([]);
  });

  it("sees an import when there is one (the check itself works)", () => {
    const imports = importedFolders(join(REPO_ROOT, "gateway", "registry", "slice-endpoints.ts"));
    expect(imports).toContainEqual({ specifier: "../../crds/child-names.js", folder: "crds" });
  });
});
