/**
 * An answer's status, error code, Retry-After and how long it took, its
 * body read to the end: what the store-outage tests judge a refusal by.
 */
export async function timedAnswer(request: () => Promise<Response>) {
  const started = Date.now();
  const res = await request();
  const body = res.headers.get("content-type")?.includes("json")
    ? ((await res.json()) as { error?: { code?: string } })
    : (await res.arrayBuffer(), {});
  return {
    status: res.status,
    code: body.error?.code,
    retryAfter: res.headers.get("retry-after"),
    ms: Date.now() - started,
  };
}
