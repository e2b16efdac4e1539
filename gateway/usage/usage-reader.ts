import { sql, type Kysely, type SelectQueryBuilder } from "kysely";
import type {
  CompletionsGroup,
  CompletionsResult,
  CostGroup,
  CostsResult,
} from "../../api/usage.js";
import type { Database } from "../store/database.js";
import type { PagePlan } from "./page-plan.js";

/**
 * Reads usage from the ledger, aggregated per bucket and group. Whose rows
 * are read is decided by the caller's key, never by the query: a member
 * key's scope is its account, and every query is narrowed to it before any
 * filter of the caller's applies, so no filter reaches another account.
 */
export type ReadScope = { kind: "account"; account: string } | { kind: "admin" };

export interface UsageFilters {
  models?: readonly string[];
  projectIds?: readonly string[];
  apiKeyIds?: readonly string[];
  accountIds?: readonly string[];
}

type LedgerColumn = "model" | "project" | "key_id" | "route" | "account";

const COMPLETIONS_COLUMNS: Record<CompletionsGroup, LedgerColumn> = {
  model: "model",
  project_id: "project",
  api_key_id: "key_id",
  route: "route",
  account_id: "account",
};

/** A cost's line item is the model: the ledger prices each request as one line. */
const COST_COLUMNS: Record<CostGroup, LedgerColumn> = {
  project_id: "project",
  line_item: "model",
  account_id: "account",
};

type LedgerQuery = SelectQueryBuilder<Database, "usage_ledger", object>;

function seconds(value: number): Date {
  return new Date(value * 1000);
}

function narrowed(
  db: Kysely<Database>,
  scope: ReadScope,
  filters: UsageFilters,
  from: number,
  to: number,
): LedgerQuery {
  let query: LedgerQuery = db
    .selectFrom("usage_ledger")
    .where("answered_at", ">=", seconds(from))
    .where("answered_at", "<", seconds(to));
  if (scope.kind === "account") query = query.where("account", "=", scope.account);
  if (filters.accountIds) query = query.where("account", "in", filters.accountIds);
  if (filters.models) query = query.where("model", "in", filters.models);
  if (filters.projectIds) query = query.where("project", "in", filters.projectIds);
  if (filters.apiKeyIds) query = query.where("key_id", "in", filters.apiKeyIds);
  return query;
}

/** The bucket of each row, by its index in the page (see page-plan.ts). */
function bucketIndex(plan: PagePlan) {
  return sql<number>`floor((extract(epoch from answered_at) - ${plan.bucketStarts[0]!}) / ${plan.widthSeconds})::int4`;
}

interface GroupKey {
  model?: string | null;
  project?: string | null;
  key_id?: string | null;
  route?: string | null;
  account?: string | null;
}

/** Rows of a grouped query: the group's columns (null when not grouped by) and the sums. */
type Grouped<T> = GroupKey & T & { bucket: number };

async function grouped<T>(
  query: LedgerQuery,
  columns: readonly LedgerColumn[],
  sums: (q: LedgerQuery) => SelectQueryBuilder<Database, "usage_ledger", T>,
  plan: PagePlan | null,
  extraGroup: readonly "currency"[] = [],
): Promise<Grouped<T>[]> {
  let q = sums(query) as unknown as SelectQueryBuilder<Database, "usage_ledger", Grouped<T>>;
  const groupBy: Array<LedgerColumn | "currency" | "bucket"> = [...columns, ...extraGroup];
  if (columns.length > 0) q = q.select(columns);
  if (plan) {
    q = q.select(bucketIndex(plan).as("bucket"));
    groupBy.push("bucket");
  }
  if (groupBy.length > 0) q = q.groupBy(groupBy as never);
  // The same answer for the same rows: results in the order of their groups.
  for (const column of [...columns, ...extraGroup]) q = q.orderBy(column as never);
  const rows = await q.execute();
  return rows.map((row) => ({ ...row, bucket: plan ? Number(row.bucket) : 0 }));
}

function bucketsOf<R>(
  plan: PagePlan,
  rows: ReadonlyArray<{ bucket: number }>,
  toResult: (row: never) => R,
) {
  const results = plan.bucketStarts.map(() => [] as R[]);
  for (const row of rows) results[row.bucket]?.push(toResult(row as never));
  return plan.bucketStarts.map((start, index) => ({
    object: "bucket" as const,
    start_time: start,
    end_time: start + plan.widthSeconds,
    results: results[index]!,
  }));
}

function uniqueColumns<G extends string>(
  groups: readonly G[] | undefined,
  columns: Record<G, LedgerColumn>,
): LedgerColumn[] {
  return [...new Set((groups ?? []).map((group) => columns[group]))];
}

interface TokenSums {
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  num_model_requests: number;
}

function tokenSums(q: LedgerQuery) {
  return q.select((eb) => [
    sql<number>`coalesce(sum(input_tokens), 0)::int8`.as("input_tokens"),
    sql<number>`coalesce(sum(output_tokens), 0)::int8`.as("output_tokens"),
    sql<number>`coalesce(sum(cached_tokens), 0)::int8`.as("cached_tokens"),
    eb.fn.countAll<number>().as("num_model_requests"),
  ]);
}

function completionsResult(row: GroupKey & TokenSums): CompletionsResult {
  return {
    object: "organization.usage.completions.result",
    input_tokens: Number(row.input_tokens),
    output_tokens: Number(row.output_tokens),
    input_cached_tokens: Number(row.cached_tokens),
    num_model_requests: Number(row.num_model_requests),
    project_id: row.project ?? null,
    api_key_id: row.key_id ?? null,
    model: row.model ?? null,
    route: row.route ?? null,
    account_id: row.account ?? null,
  };
}

export interface CompletionsAnswer {
  buckets: Array<{
    object: "bucket";
    start_time: number;
    end_time: number;
    results: CompletionsResult[];
  }>;
  totals: CompletionsResult;
}

export async function readCompletionsUsage(
  db: Kysely<Database>,
  scope: ReadScope,
  filters: UsageFilters,
  groups: readonly CompletionsGroup[] | undefined,
  plan: PagePlan,
): Promise<CompletionsAnswer> {
  const columns = uniqueColumns(groups, COMPLETIONS_COLUMNS);
  const [rows, totals] = await Promise.all([
    plan.bucketStarts.length === 0
      ? Promise.resolve([])
      : grouped(narrowed(db, scope, filters, plan.from, plan.to), columns, tokenSums, plan),
    tokenSums(narrowed(db, scope, filters, plan.rangeFrom, plan.rangeTo)).executeTakeFirstOrThrow(),
  ]);
  return {
    buckets: bucketsOf(plan, rows, completionsResult),
    totals: completionsResult(totals),
  };
}

interface CostSums {
  currency: string;
  /** `numeric`, exact, as a decimal string. */
  amount: string;
}

function costSums(q: LedgerQuery) {
  return q.select(["currency", sql<string>`sum(cost)::text`.as("amount")]);
}

function costsResult(row: GroupKey & CostSums): CostsResult {
  return {
    object: "organization.costs.result",
    amount: {
      value: Number(row.amount),
      value_decimal: row.amount,
      currency: row.currency.toLowerCase(),
    },
    line_item: row.model ?? null,
    project_id: row.project ?? null,
    account_id: row.account ?? null,
  };
}

export interface CostsAnswer {
  buckets: Array<{
    object: "bucket";
    start_time: number;
    end_time: number;
    results: CostsResult[];
  }>;
  /** One per currency. */
  totals: CostsResult[];
}

export async function readCosts(
  db: Kysely<Database>,
  scope: ReadScope,
  filters: UsageFilters,
  groups: readonly CostGroup[] | undefined,
  plan: PagePlan,
): Promise<CostsAnswer> {
  const columns = uniqueColumns(groups, COST_COLUMNS);
  const [rows, totals] = await Promise.all([
    plan.bucketStarts.length === 0
      ? Promise.resolve([])
      : grouped(narrowed(db, scope, filters, plan.from, plan.to), columns, costSums, plan, [
          "currency",
        ]),
    grouped(narrowed(db, scope, filters, plan.rangeFrom, plan.rangeTo), [], costSums, null, [
      "currency",
    ]),
  ]);
  return {
    buckets: bucketsOf(plan, rows, costsResult),
    totals: totals.sort((a, b) => a.currency.localeCompare(b.currency)).map(costsResult),
  };
}
