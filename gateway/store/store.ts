import type { Kysely } from "kysely";
import type { Logger } from "../../lib/logger.js";
import {
  connectStore,
  type ConnectOptions,
  type StoreEngine,
  type StoreTarget,
} from "./connect.js";
import type { Database } from "./database.js";
import { migrateToLatest } from "./migrate.js";

/** The gateway's system of record, migrated and ready for queries. */
export interface Store {
  db: Kysely<Database>;
  engine: StoreEngine;
  close(): Promise<void>;
}

/**
 * Connects and migrates: the gateway calls this once at start-up, before it
 * serves, so every query it runs finds the schema it was written for. A
 * server that cannot be reached fails start-up (the pod restarts and tries
 * again) rather than serving with nowhere to record usage.
 */
export async function openStore(
  target: StoreTarget,
  options: ConnectOptions & { logger?: Logger } = {},
): Promise<Store> {
  const { db, engine } = await connectStore(target, options);
  try {
    const applied = await migrateToLatest(db);
    if (applied.length > 0) options.logger?.info({ engine, applied }, "store migrated");
  } catch (error) {
    await db.destroy();
    throw error;
  }
  return { db, engine, close: () => db.destroy() };
}

/** For logs: the target without credentials. */
export function describeTarget(target: StoreTarget): string {
  if ("dataDir" in target) return `pglite:${target.dataDir}`;
  const url = new URL(target.url);
  return `${url.protocol}//${url.host}${url.pathname}`;
}
