import { z } from "zod";
import type { ChatMessage, InputRole } from "./input-items.js";
import { newId } from "./responses-response.js";

/**
 * Stored responses as the OpenAI API shapes them: the input items a
 * response was made from (each a message with an id), the list answer of
 * `GET /v1/responses/{id}/input_items`, and the answer to a deletion.
 */
export const storedInputItemSchema = z.object({
  id: z.string(),
  type: z.literal("message"),
  role: z.enum(["user", "assistant", "system", "developer"]),
  status: z.literal("completed"),
  content: z.array(z.object({ type: z.enum(["input_text", "output_text"]), text: z.string() })),
});
export type StoredInputItem = z.infer<typeof storedInputItemSchema>;

/**
 * An input item as listed: an assistant message's `output_text` parts carry
 * `annotations`, as every output message's do (the OpenAI clients' types
 * require it). Added when listed, so items stored before it have it too.
 */
export const inputItemSchema = storedInputItemSchema.extend({
  content: z.array(
    z.union([
      z.object({ type: z.literal("input_text"), text: z.string() }),
      z.object({
        type: z.literal("output_text"),
        text: z.string(),
        annotations: z.array(z.never()).describe("Always empty"),
      }),
    ]),
  ),
});
export type InputItem = z.infer<typeof inputItemSchema>;

function listed(item: StoredInputItem): InputItem {
  return {
    ...item,
    content: item.content.map((part) =>
      part.type === "output_text"
        ? { ...part, type: "output_text", annotations: [] }
        : { ...part, type: "input_text" },
    ),
  };
}

export const inputItemListSchema = z.object({
  object: z.literal("list"),
  data: z.array(inputItemSchema),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});
export type InputItemList = z.infer<typeof inputItemListSchema>;

export const deletedResponseSchema = z.object({
  id: z.string(),
  object: z.literal("response"),
  deleted: z.literal(true),
});

/**
 * `GET /v1/responses/{id}`: OpenAI streams a background response back with
 * `stream=true`. Every response here is answered before it is stored, so it
 * is retrieved whole: `true` is refused rather than answered with JSON that
 * a client reading events would take for an empty stream.
 */
/**
 * A parameter the OpenAI API takes that changes nothing here (`include`,
 * which the clients write `include[]`): accepted, so that a client sending it
 * works, and ignored. Any other unknown parameter is a 400 naming it.
 */
const ignoredOpenAiParam = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .describe("Taken as the OpenAI API takes it, and ignored: nothing here depends on it");

/** The ignored parameters, which may come more than once (the clients repeat `include[]`). */
export const REPEATABLE_QUERY_PARAMS: ReadonlySet<string> = new Set([
  "include",
  "include[]",
  "include_obfuscation",
  "starting_after",
]);

/** `DELETE` and `POST …/cancel` take no parameter. */
export const noQuerySchema = z.strictObject({});

export const retrieveQuerySchema = z.strictObject({
  stream: z
    .enum(["false"], {
      error: "a stored response is retrieved whole; streaming it back is not supported",
    })
    .optional()
    .describe("Only `false`: a stored response is retrieved whole (`true` is a 400)"),
  include: ignoredOpenAiParam,
  "include[]": ignoredOpenAiParam,
  include_obfuscation: ignoredOpenAiParam,
  starting_after: ignoredOpenAiParam,
});

/** `GET /v1/responses/{id}/input_items`: the query as the OpenAI API takes it. */
export const inputItemsQuerySchema = z.strictObject({
  after: z.string().min(1).max(128).optional().describe("An item id: list the items after it"),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .default(20)
    .describe("How many items to list, 1 to 100"),
  order: z
    .enum(["asc", "desc"])
    .default("desc")
    .describe("`asc`: oldest first; `desc` (the default): newest first"),
  include: ignoredOpenAiParam,
  "include[]": ignoredOpenAiParam,
});
export type InputItemsQuery = z.infer<typeof inputItemsQuerySchema>;

/** The id in a stored-response path, as the gateway mints them (resp_ and 48 hex digits). */
export const responseIdParamSchema = z.string().describe("A response id (`resp_…`)");

function partType(role: InputRole): "input_text" | "output_text" {
  return role === "assistant" ? "output_text" : "input_text";
}

/** A request's turns (a string `input` is one user turn) as the items it stores, each with an id. */
export function storedItemsOf(turns: readonly ChatMessage[]): StoredInputItem[] {
  return turns.map((turn) => ({
    id: newId("msg"),
    type: "message",
    role: turn.role,
    status: "completed",
    content: [{ type: partType(turn.role), text: turn.content }],
  }));
}

/** The message items a stored answer adds to a conversation: its assistant output. */
export function outputMessagesOf(response: unknown): ChatMessage[] {
  const output = (response as { output?: unknown }).output;
  if (!Array.isArray(output)) return [];
  return output.flatMap((item: { type?: unknown; content?: unknown }) => {
    if (item?.type !== "message" || !Array.isArray(item.content)) return [];
    const text = item.content
      .map((part: { text?: unknown }) => (typeof part?.text === "string" ? part.text : ""))
      .join("");
    return [{ role: "assistant" as const, content: text }];
  });
}

export type PageResult = { ok: true; list: InputItemList } | { ok: false; param: "after" };

/** One page of items, as the OpenAI API pages them; an `after` that is not an item is refused. */
export function pageOfItems(items: readonly StoredInputItem[], query: InputItemsQuery): PageResult {
  const ordered = query.order === "asc" ? items : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const at = ordered.findIndex((item) => item.id === query.after);
    if (at < 0) return { ok: false, param: "after" };
    start = at + 1;
  }
  const data = ordered.slice(start, start + query.limit).map(listed);
  return {
    ok: true,
    list: {
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: start + data.length < ordered.length,
    },
  };
}
