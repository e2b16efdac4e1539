/**
 * Which buckets one page of a usage answer holds, and which rows they
 * count: pure arithmetic over Unix seconds, decided before any query.
 *
 * Buckets start on multiples of their width (midnight UTC for `1d`), as a
 * usage dashboard draws them; the first bucket may begin before
 * `start_time`, but counts only rows from `start_time` on, and the last
 * only rows before `end_time`. A page holds `limit` buckets; `next_page`
 * names where the next one starts.
 */
export interface PagePlan {
  /** The start of each bucket of the page, in order. */
  bucketStarts: number[];
  widthSeconds: number;
  /** The rows counted by this page: `from <= answered_at < to` (Unix seconds). */
  from: number;
  to: number;
  /** The whole requested range, for the totals. */
  rangeFrom: number;
  rangeTo: number;
  /** Where the next page starts; null on the last page. */
  nextPageStart: number | null;
}

export interface PageRequest {
  startTime: number;
  /** Exclusive; the caller passes "now" when the query has none. */
  endTime: number;
  widthSeconds: number;
  limit: number;
  /** The start of this page (`page_<seconds>`), when the query names one. */
  pageStart?: number;
}

export function planPage(request: PageRequest): PagePlan {
  const { startTime, endTime, widthSeconds: width, limit } = request;
  const origin = Math.floor(startTime / width) * width;
  // A cursor from an earlier answer is on a bucket boundary; any other value
  // is brought to the bucket that holds it, and never before the range.
  const first = Math.max(origin, Math.floor((request.pageStart ?? origin) / width) * width);
  const bucketStarts: number[] = [];
  for (let start = first; start < endTime && bucketStarts.length < limit; start += width) {
    bucketStarts.push(start);
  }
  const pageEnd = first + limit * width;
  return {
    bucketStarts,
    widthSeconds: width,
    from: Math.max(startTime, first),
    to: Math.min(endTime, pageEnd),
    rangeFrom: startTime,
    rangeTo: endTime,
    nextPageStart: pageEnd < endTime ? pageEnd : null,
  };
}

/** The bucket a row counted by `plan` falls in: its index in `bucketStarts`. */
export function bucketIndexOf(plan: PagePlan, answeredAtSeconds: number): number {
  return Math.floor((answeredAtSeconds - plan.bucketStarts[0]!) / plan.widthSeconds);
}
