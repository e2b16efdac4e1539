import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { afterAll } from "vitest";
import type { StoreEngine, StoreTarget } from "../../../gateway/store/connect.js";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";

/**
 * The store's tests run one body against every engine: PGlite (the embedded
 * default) and a real PostgreSQL server. Each test asks for a fresh, empty
 * database; the server starts on the first ask and stops after the file.
 */
export interface StoreEngineHarness {
  name: StoreEngine;
  /** A fresh, empty database. */
  newTarget(): Promise<StoreTarget>;
  /** The real server (postgres only), started on first use. */
  server(): Promise<PostgresServer>;
}

export function useStoreEngines(): StoreEngineHarness[] {
  const folders: string[] = [];
  let server: Promise<PostgresServer> | undefined;
  let pgliteTemplate: Promise<string> | undefined;

  const newFolder = async (): Promise<string> => {
    const dir = await mkdtemp(join(tmpdir(), "modelgate-pglite-"));
    folders.push(dir);
    return dir;
  };
  // A new PGlite folder runs initdb in WASM (seconds); a copy of one made
  // once per file is a valid empty cluster and opens in a fraction of that.
  const template = async (): Promise<string> => {
    const dir = join(await newFolder(), "template");
    const pglite = await PGlite.create(dir);
    await pglite.close();
    return dir;
  };
  const startServer = () => (server ??= startPostgresServer());

  afterAll(async () => {
    if (server) await (await server).stop();
    await Promise.all(folders.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  return [
    {
      name: "pglite",
      async newTarget() {
        const source = await (pgliteTemplate ??= template());
        const dataDir = join(await newFolder(), "data");
        await cp(source, dataDir, { recursive: true });
        return { dataDir };
      },
      server: () => Promise.reject(new Error("no server: this is the embedded engine")),
    },
    {
      name: "postgres",
      async newTarget() {
        return { url: await (await startServer()).createDatabase() };
      },
      server: startServer,
    },
  ];
}
