import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPlatform, SECRETS, type Platform } from "../support/platform.js";

/**
 * Stored responses through the whole path (real runtimes, the real store in
 * the gateway's state folder): create, retrieve, list input items, delete,
 * on both routes, and every way an id is not the caller's answering alike.
 */
let p: Platform;
beforeAll(async () => {
  p = await startPlatform();
});
afterAll(async () => p?.close());

const ASK = { model: "tiny-gpt", input: "Hello there", max_output_tokens: 6, temperature: 0 };

function get(path: string, headers: Record<string, string> = {}, method = "GET") {
  return fetch(`${p.url}${path}`, {
    method,
    headers: { "x-api-key": p.keys.acme.key, ...headers },
  });
}

function payGet(path: string, kid = "k1", secret: string = SECRETS.k1, method = "GET") {
  return fetch(`${p.url}${path}`, {
    method,
    headers: { "pay-signature": p.sign(`${method} ${path}`, kid, secret) },
  });
}

async function created(body: unknown, headers: Record<string, string> = {}) {
  const res = await p.api(body, { headers });
  expect(res.status).toBe(200);
  return (await res.json()) as { id: string; store: boolean; output: unknown[] };
}

interface Item {
  id: string;
  role: string;
  content: { type: string; text: string }[];
}
interface List {
  object: string;
  data: Item[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

async function list(path: string): Promise<List> {
  const res = await get(path);
  expect(res.status).toBe(200);
  return (await res.json()) as List;
}

async function rowsWith(id: string): Promise<number> {
  const db = await p.components.store.db();
  const rows = await db.selectFrom("stored_responses").select("id").where("id", "=", id).execute();
  return rows.length;
}

/** A 404's body with the id it names taken out: what tells one 404 from another. */
async function notFoundShape(res: Response, id: string): Promise<string> {
  expect(res.status).toBe(404);
  return JSON.stringify(await res.json()).replaceAll(id, "<id>");
}

describe("stored responses on the API-key route", () => {
  it("retrieves the response as it was answered, right after the create", async () => {
    const answer = await created(ASK);
    expect(answer.store).toBe(true);
    const res = await get(`/v1/responses/${answer.id}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(answer);
  });

  it("stores a response whose store is null, as the default says", async () => {
    const answer = await created({ ...ASK, store: null });
    expect(answer.store).toBe(true);
    expect((await get(`/v1/responses/${answer.id}`)).status).toBe(200);
  });

  it("lists input items newest first by default and pages with after and limit", async () => {
    const input = [
      { role: "user", content: "one" },
      { role: "assistant", content: "two" },
      { role: "user", content: [{ type: "input_text", text: "three" }] },
    ];
    const { id } = await created({ ...ASK, input });
    const all = await list(`/v1/responses/${id}/input_items`);
    expect(all.object).toBe("list");
    expect(all.has_more).toBe(false);
    expect(all.data.map((i) => i.content[0]!.text)).toEqual(["three", "two", "one"]);
    expect(all.data[1]).toMatchObject({
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "two", annotations: [] }],
    });
    expect(all.data[0]!.content[0]).toEqual({ type: "input_text", text: "three" });
    expect(all.first_id).toBe(all.data[0]!.id);
    expect(all.last_id).toBe(all.data[2]!.id);

    const first = await list(`/v1/responses/${id}/input_items?order=asc&limit=2`);
    expect(first.data.map((i) => i.role)).toEqual(["user", "assistant"]);
    expect(first.has_more).toBe(true);
    const rest = await list(
      `/v1/responses/${id}/input_items?order=asc&limit=2&after=${first.last_id}`,
    );
    expect(rest.data.map((i) => i.content[0]!.text)).toEqual(["three"]);
    expect(rest.has_more).toBe(false);
  });

  it("refuses to stream a stored response back, naming `stream`", async () => {
    const { id } = await created(ASK);
    const res = await get(`/v1/responses/${id}?stream=true`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(["error"]);
    expect(body.error).toMatchObject({ param: "stream", code: "invalid_query" });
    expect((body.error as { message: string }).message).toMatch(/retrieved whole/);
    expect((await get(`/v1/responses/${id}?stream=false`)).status).toBe(200);
  });

  it("refuses a query out of range naming the parameter", async () => {
    const { id } = await created(ASK);
    for (const [query, param] of [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["order=up", "order"],
    ] as const) {
      const res = await get(`/v1/responses/${id}/input_items?${query}`);
      expect(res.status, query).toBe(400);
      // A read makes no response: the ErrorEnvelope alone, not a failed response.
      const body = (await res.json()) as Record<string, unknown>;
      expect(Object.keys(body), query).toEqual(["error"]);
      expect(body.error).toMatchObject({ param, code: "invalid_query" });
    }
  });

  it("refuses an unknown or repeated query parameter by name, and takes the OpenAI clients' include", async () => {
    const { id } = await created(ASK);
    for (const [path, param, message, method] of [
      [`/v1/responses/${id}?foo=bar`, "foo", /Unknown query parameter 'foo'/],
      [`/v1/responses/${id}/input_items?foo=bar`, "foo", /Unknown query parameter 'foo'/],
      [`/v1/responses/${id}/input_items?limit=1&limit=2`, "limit", /given more than once/],
      [`/v1/responses/${id}?stream=false&stream=false`, "stream", /given more than once/],
      [`/v1/responses/${id}?force=1`, "force", /Unknown query parameter 'force'/, "DELETE"],
      [`/v1/responses/${id}/cancel?now=1`, "now", /Unknown query parameter 'now'/, "POST"],
    ] as const) {
      const res = await get(path, {}, method ?? "GET");
      expect(res.status, path).toBe(400);
      const { error } = (await res.json()) as { error: Record<string, string> };
      expect(error, path).toMatchObject({ param, code: "invalid_query" });
      expect(error.message, path).toMatch(message);
    }
    for (const path of [
      `/v1/responses/${id}?include[]=message.output_text.logprobs`,
      `/v1/responses/${id}/input_items?include=a&include=b&limit=5`,
    ]) {
      expect((await get(path)).status, path).toBe(200);
    }
  });

  it("answers an `after` naming no item of the response 404, naming the cursor", async () => {
    const { id } = await created(ASK);
    const res = await get(`/v1/responses/${id}/input_items?after=msg_nope`);
    expect(res.status).toBe(404);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(["error"]);
    expect(body.error).toMatchObject({ param: "after", code: "input_item_not_found" });
  });

  it("answers an id holding bytes PostgreSQL's text refuses as any unknown id", async () => {
    // A NUL byte in a query parameter fails the query on PostgreSQL ("invalid
    // byte sequence"): it must read as no row, not as a 500.
    const never = await notFoundShape(await get("/v1/responses/resp_nothere"), "resp_nothere");
    for (const [path, method] of [
      ["/v1/responses/resp_%00", "GET"],
      ["/v1/responses/resp_%00", "DELETE"],
      ["/v1/responses/resp_%00/input_items", "GET"],
    ] as const) {
      const res = await get(path, {}, method);
      expect(await notFoundShape(res, "resp_\\u0000"), `${method} ${path}`).toBe(never);
    }
    const res = await p.api({ ...ASK, previous_response_id: "resp_\u0000" });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({
      error: { code: "response_not_found", param: "previous_response_id" },
    });
  });

  it("deletes as the OpenAI API does, after which the id is unknown", async () => {
    const { id } = await created(ASK);
    const res = await get(`/v1/responses/${id}`, {}, "DELETE");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id, object: "response", deleted: true });
    expect(await rowsWith(id)).toBe(0);
    expect((await get(`/v1/responses/${id}`)).status).toBe(404);
    expect((await get(`/v1/responses/${id}`, {}, "DELETE")).status).toBe(404);
  });

  it("refuses to cancel the caller's response, answered in the foreground, and leaves it", async () => {
    const { id } = await created(ASK);
    // As the OpenAI clients send it: a POST with no body, or an empty JSON one.
    for (const headers of [{}, { "content-type": "application/json" }] as Record<
      string,
      string
    >[]) {
      const res = await get(`/v1/responses/${id}/cancel`, headers, "POST");
      expect(res.status).toBe(400);
      expect(res.headers.get("x-request-id")).toBeTruthy();
      const { error } = (await res.json()) as { error: Record<string, string> };
      expect(error).toMatchObject({
        code: "response_not_cancellable",
        type: "invalid_request_error",
        param: "response_id",
      });
      expect(error.message).toContain(id);
      expect(error.message).toContain("background");
    }
    expect((await get(`/v1/responses/${id}`)).status).toBe(200);
  });

  it("answers another tenant's, a deleted, a store:false and a never-made id alike", async () => {
    const never = "resp_000000000000000000000000000000000000000000000000";
    const shape = await notFoundShape(await get(`/v1/responses/${never}`), never);

    const foreign = await created(ASK, { "x-project-id": "web" });
    // Another account, the same account without the project, the payment route.
    expect(
      await notFoundShape(
        await get(`/v1/responses/${foreign.id}`, { "x-api-key": p.keys.limited.key }),
        foreign.id,
      ),
    ).toBe(shape);
    expect(await notFoundShape(await get(`/v1/responses/${foreign.id}`), foreign.id)).toBe(shape);
    expect((await payGet(`/pay/v1/responses/${foreign.id}`)).status).toBe(404);
    // Its owner sees it, and no other can delete it.
    expect(
      (await get(`/v1/responses/${foreign.id}`, { "x-api-key": p.keys.limited.key }, "DELETE"))
        .status,
    ).toBe(404);
    expect((await get(`/v1/responses/${foreign.id}`, { "x-project-id": "web" })).status).toBe(200);

    const deleted = await created(ASK);
    await get(`/v1/responses/${deleted.id}`, {}, "DELETE");
    expect(await notFoundShape(await get(`/v1/responses/${deleted.id}`), deleted.id)).toBe(shape);

    const unstored = await created({ ...ASK, store: false });
    expect(unstored.store).toBe(false);
    expect(await notFoundShape(await get(`/v1/responses/${unstored.id}`), unstored.id)).toBe(shape);
    expect(
      await notFoundShape(await get(`/v1/responses/${unstored.id}/input_items`), unstored.id),
    ).toBe(shape);
    // Cancel tells nothing more: another tenant's id is the never-made one's 404.
    for (const id of [never, foreign.id, deleted.id, unstored.id]) {
      expect(await notFoundShape(await get(`/v1/responses/${id}/cancel`, {}, "POST"), id)).toBe(
        shape,
      );
    }
  });

  it("writes nothing of a store:false request", async () => {
    const { id } = await created({ ...ASK, store: false, input: "do not keep me" });
    expect(await rowsWith(id)).toBe(0);
    const db = await p.components.store.db();
    const rows = await db.selectFrom("stored_responses").select(["input_items"]).execute();
    expect(rows.some((row) => row.input_items.includes("do not keep me"))).toBe(false);
  });

  it("stores a streamed response as its terminal event carries it", async () => {
    const res = await p.api({ ...ASK, stream: true });
    expect(res.status).toBe(200);
    const text = await res.text();
    const last = text.trim().split("\n\n").at(-1)!;
    const terminal = JSON.parse(
      last
        .split("\n")
        .find((l) => l.startsWith("data: "))!
        .slice(6),
    ) as { type: string; response: { id: string } };
    expect(["response.completed", "response.incomplete"]).toContain(terminal.type);
    const stored = await get(`/v1/responses/${terminal.response.id}`);
    expect(stored.status).toBe(200);
    expect(await stored.json()).toEqual(terminal.response);
  });

  it("records the runtime endpoint that served it", async () => {
    const { id } = await created(ASK);
    const db = await p.components.store.db();
    const row = await db
      .selectFrom("stored_responses")
      .select(["served_by", "owner"])
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    expect(row.served_by).toBe(p.runtimes.gpt.url);
    expect(row.owner).toBe("key:acme/");
  });
});

describe("methods the stored-response paths do not serve", () => {
  it("answers a bodiless QUERY (no Content-Type) with a 405 and Allow, not a 400 or a 500", async () => {
    // Fastify refuses a QUERY without Content-Type (RFC 10008) before any
    // handler; the path serves no QUERY at all, which is the answer.
    const res = await request(`${p.url}/v1/responses/resp_x`, {
      method: "QUERY" as "GET",
      headers: { "x-api-key": p.keys.acme.key },
    });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe("GET, DELETE, HEAD");
    const body = (await res.body.json()) as { error: { code: string } };
    expect(body.error.code).toBe("method_not_allowed");
  });
});

describe("stored responses on the payment route", () => {
  it("is read and deleted with a signature over the request target, by the same kid only", async () => {
    const res = await p.pay(ASK);
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { id: string };
    const path = `/pay/v1/responses/${answer.id}`;

    const got = await payGet(path);
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(answer);
    expect((await payGet(`${path}/input_items?limit=1`)).status).toBe(200);
    // Another signing key, the API-key route, no signature, a signature for another target.
    expect((await payGet(path, "k2", SECRETS.k2new)).status).toBe(404);
    expect((await get(`/v1/responses/${answer.id}`)).status).toBe(404);
    expect((await fetch(`${p.url}${path}`)).status).toBe(401);
    const other = await fetch(`${p.url}${path}`, {
      headers: { "pay-signature": p.sign(`GET ${path}/input_items`) },
    });
    expect(other.status).toBe(401);

    const cancel = await payGet(`${path}/cancel`, "k1", SECRETS.k1, "POST");
    expect(cancel.status).toBe(400);
    expect(((await cancel.json()) as { error: { code: string } }).error.code).toBe(
      "response_not_cancellable",
    );
    expect((await payGet(`${path}/cancel`, "k2", SECRETS.k2new, "POST")).status).toBe(404);
    // A signature over the read is not one over the cancel.
    const replayed = await fetch(`${p.url}${path}/cancel`, {
      method: "POST",
      headers: { "pay-signature": p.sign(`GET ${path}`) },
    });
    expect(replayed.status).toBe(401);

    const del = await payGet(path, "k1", SECRETS.k1, "DELETE");
    expect(await del.json()).toEqual({ id: answer.id, object: "response", deleted: true });
    expect((await payGet(path)).status).toBe(404);
  });
});
