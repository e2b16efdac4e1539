import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import type { StoreEngine, StoreTarget } from "../../../gateway/store/connect.js";
import { seedPgliteFolder } from "../../support/pglite-template.js";
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

  const newFolder = async (): Promise<string> => {
    const dir = await mkdtemp(join(tmpdir(), "modelgate-pglite-"));
    folders.push(dir);
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
        const dataDir = join(await newFolder(), "data");
        await seedPgliteFolder(dataDir);
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
