import type { Kysely } from "kysely";
import { Migrator, type MigrationProvider } from "kysely/migration";
import { errorText } from "../../lib/error-text.js";
import { MIGRATIONS } from "./migrations/index.js";

/** The migrations, from the static list (never read from a folder at run time). */
export const migrationProvider: MigrationProvider = {
  getMigrations: () => Promise.resolve({ ...MIGRATIONS }),
};

/**
 * Brings the schema to the newest migration and returns the names this call
 * applied (none when it was already there). Forward only: there is no down.
 *
 * Several replicas may start together: Kysely's Migrator takes a PostgreSQL
 * advisory lock (`pg_advisory_lock`) on one connection for the whole run and
 * reads the applied migrations under it, so exactly one replica applies each
 * migration and the others find it applied. Each run is one transaction:
 * a migration that fails leaves the schema as it was. On PGlite there is one
 * connection in one process, which serializes the same way.
 */
export async function migrateToLatest(
  db: Kysely<any>, // eslint-disable-line @typescript-eslint/no-explicit-any -- the Migrator runs on any schema
  provider: MigrationProvider = migrationProvider,
): Promise<string[]> {
  const migrator = new Migrator({ db, provider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((result) => result.status === "Error");
    throw new Error(
      `store migration ${failed ? `${failed.migrationName} ` : ""}failed: ${errorText(error)}`,
      { cause: error },
    );
  }
  return (results ?? [])
    .filter((result) => result.status === "Success")
    .map((result) => result.migrationName);
}
