import { z } from "zod";
import { LEDGER_ROUTES } from "./database.js";

/**
 * One answered request as the ledger sink receives it: journaled by the
 * outbox (camelCase, as in code) before the answer, and written to the
 * `usage_ledger` table (snake_case) in batches after. Fields are only ever
 * added: a journaled entry outlives the process and may be replayed by a
 * newer version.
 */
const count = z
  .number()
  .int()
  .nonnegative()
  .max(2 ** 31 - 1);

/** A non-negative decimal without exponent, as PostgreSQL's `numeric` reads it. */
export const decimalSchema = z.string().regex(/^[0-9]+(\.[0-9]+)?$/, "must be a decimal number");

export const currencySchema = z
  .string()
  .regex(/^[A-Z]{3}$/, "must be an ISO 4217 code such as USD");

export const ledgerEntrySchema = z
  .object({
    /** The id the gateway minted for the request: the ledger's key. */
    responseId: z.string().min(1),
    /** The caller's `x-request-id`: correlation only. */
    requestId: z.string().min(1),
    route: z.enum(LEDGER_ROUTES),
    account: z.string().min(1),
    project: z.string().min(1).nullable(),
    keyId: z.string().min(1).nullable(),
    agentId: z.string().min(1).nullable(),
    model: z.string().min(1),
    inputTokens: count,
    outputTokens: count,
    /** Of the input tokens, those read from the runtime's prefix cache; absent in entries journaled before. */
    cachedTokens: count.optional(),
    /** What the request cost at the model's prices when it was answered. */
    cost: decimalSchema,
    currency: currencySchema,
    /** When the gateway answered (RFC 3339). */
    time: z.iso.datetime({ offset: true }),
  })
  .strict();

export type LedgerEntry = z.infer<typeof ledgerEntrySchema>;

/** The outbox's `parse` for entries read back from the journal; throws on a corrupt one. */
export function parseLedgerEntry(value: unknown): LedgerEntry {
  return ledgerEntrySchema.parse(value);
}
