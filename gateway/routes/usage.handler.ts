import type { FastifyRequest } from "fastify";
import type { Kysely } from "kysely";
import type { z } from "zod";
import {
  BUCKET_WIDTHS,
  DEFAULT_LIMITS,
  completionsUsageQuerySchema,
  costsQuerySchema,
  type CompletionsUsagePage,
  type CostsPage,
  parseQuery,
} from "../../api/usage.js";
import { isCodedError } from "../../lib/coded-error.js";
import type { StoreCalls } from "../store/store-calls.js";
import { GatewayErrors } from "../errors.js";
import type { Database } from "../store/database.js";
import { isStoreUnreachable } from "../store/store-unreachable.js";
import { planPage, type PagePlan } from "../usage/page-plan.js";
import {
  readCompletionsUsage,
  readCosts,
  type ReadScope,
  type UsageFilters,
} from "../usage/usage-reader.js";

export interface UsageDeps {
  /**
   * The store holding the ledger. A usage page is a slow read: refused at
   * once while the database is known down, and otherwise waited for, since
   * an aggregation over a large ledger may take longer than the read
   * deadline on a database that is fine (store-calls.ts).
   */
  store: Pick<StoreCalls, "slowRead">;
  now: () => number;
}

/**
 * Whose usage the caller may read: its own account's, or, with an admin
 * key, every account's. Only an admin may name or group by accounts; a
 * member key is refused for asking rather than answered with its own rows,
 * so a client never mistakes one account's usage for another's.
 */
function scopeOf(
  request: FastifyRequest,
  query: { account_ids?: readonly string[] | undefined; group_by?: readonly string[] | undefined },
): ReadScope {
  const caller = request.caller;
  if (caller?.kind !== "api-key") throw new Error("usage read without an API-key caller");
  if (caller.admin) return { kind: "admin" };
  if (query.account_ids) throw GatewayErrors.adminOnly("account_ids");
  if (query.group_by?.includes("account_id")) throw GatewayErrors.adminOnly("group_by");
  return { kind: "account", account: caller.account };
}

function pageStartOf(page: string | undefined): number | undefined {
  return page === undefined ? undefined : Number(page.slice("page_".length));
}

function planOf(
  query: {
    start_time: number;
    end_time?: number | undefined;
    page?: string | undefined;
    limit?: number | undefined;
    bucket_width: keyof typeof BUCKET_WIDTHS;
  },
  nowMs: number,
): PagePlan {
  const pageStart = pageStartOf(query.page);
  return planPage({
    startTime: query.start_time,
    endTime: query.end_time ?? Math.ceil(nowMs / 1000),
    widthSeconds: BUCKET_WIDTHS[query.bucket_width],
    limit: query.limit ?? DEFAULT_LIMITS[query.bucket_width],
    ...(pageStart !== undefined ? { pageStart } : {}),
  });
}

function filtersOf(query: {
  models?: string[] | undefined;
  project_ids?: string[] | undefined;
  api_key_ids?: string[] | undefined;
  account_ids?: string[] | undefined;
}): UsageFilters {
  return {
    ...(query.models ? { models: query.models } : {}),
    ...(query.project_ids ? { projectIds: query.project_ids } : {}),
    ...(query.api_key_ids ? { apiKeyIds: query.api_key_ids } : {}),
    ...(query.account_ids ? { accountIds: query.account_ids } : {}),
  };
}

/** A ledger that cannot answer now is the usage endpoints' own 503; anything else stays a 500. */
function unavailable(error: unknown): never {
  if (isStoreUnreachable(error) || (isCodedError(error) && error.code === "store_unavailable")) {
    throw Object.assign(GatewayErrors.usageUnavailable(), { cause: error });
  }
  throw error;
}

function nextPage(plan: PagePlan): string | null {
  return plan.nextPageStart === null ? null : `page_${plan.nextPageStart}`;
}

/**
 * One usage page: parse the query (a 400 names the parameter), decide whose
 * rows the caller may read, plan the buckets, read them. Completions and
 * costs differ only in their query schema and their reader.
 */
function pageHandler<
  S extends typeof completionsUsageQuerySchema | typeof costsQuerySchema,
  Bucket,
  Totals,
>(
  deps: UsageDeps,
  schema: S,
  read: (
    db: Kysely<Database>,
    scope: ReadScope,
    filters: UsageFilters,
    groups: z.infer<S>["group_by"],
    plan: PagePlan,
  ) => Promise<{ buckets: Bucket[]; totals: Totals }>,
) {
  return async (request: FastifyRequest) => {
    const parsed = parseQuery(schema, request.query as Record<string, unknown>);
    if (!parsed.ok) throw GatewayErrors.invalidQuery(parsed.problem.message, parsed.problem.param);
    const { query } = parsed;
    const scope = scopeOf(request, query);
    const plan = planOf(query, deps.now());
    const { buckets, totals } = await deps.store
      .slowRead((db) => read(db, scope, filtersOf(query), query.group_by, plan))
      .catch(unavailable);
    return {
      object: "page" as const,
      data: buckets,
      has_more: plan.nextPageStart !== null,
      next_page: nextPage(plan),
      totals,
    };
  };
}

export function usageHandlers(deps: UsageDeps): {
  completionsUsage: (request: FastifyRequest) => Promise<CompletionsUsagePage>;
  costs: (request: FastifyRequest) => Promise<CostsPage>;
} {
  return {
    completionsUsage: pageHandler(deps, completionsUsageQuerySchema, readCompletionsUsage),
    costs: pageHandler(deps, costsQuerySchema, readCosts),
  };
}
