import type { Migration } from "kysely/migration";
import * as usageLedger from "./0001-usage-ledger.js";
import * as usageRead from "./0002-usage-read.js";
import * as storedResponses from "./0003-stored-responses.js";
import * as filesAndBatches from "./0004-files-and-batches.js";
import * as cachedTokens from "./0005-cached-tokens.js";
import * as batchCounts from "./0006-batch-counts.js";
import * as batchOutputExpiry from "./0007-batch-output-expiry.js";
import * as fileTombstones from "./0008-file-tombstones.js";
import * as batchModelAndUsage from "./0009-batch-model-and-usage.js";
import * as batchLineAttempts from "./0010-batch-line-attempts.js";
import * as batchJsonAsText from "./0011-batch-json-as-text.js";

/**
 * Every migration, by name, in the order they apply. Listed here rather than
 * read from the folder, so that the same list works from the sources (tsx),
 * from dist/ and from a bundle. Names sort in order and never change once
 * released: the database records which names it has applied.
 */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  "0001-usage-ledger": usageLedger,
  "0002-usage-read": usageRead,
  "0003-stored-responses": storedResponses,
  "0004-files-and-batches": filesAndBatches,
  "0005-cached-tokens": cachedTokens,
  "0006-batch-counts": batchCounts,
  "0007-batch-output-expiry": batchOutputExpiry,
  "0008-file-tombstones": fileTombstones,
  "0009-batch-model-and-usage": batchModelAndUsage,
  "0010-batch-line-attempts": batchLineAttempts,
  "0011-batch-json-as-text": batchJsonAsText,
};
