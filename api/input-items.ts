import { z } from "zod";

/**
 * `input` as the OpenAI clients send a conversation: a list of message
 * items, each with a `role` and a `content` that is a string or a list of
 * text parts (`input_text`; `output_text` in an assistant turn sent back
 * as the API returned it). Nothing else is accepted: an image, a file or a
 * tool call is a 400 naming the item.
 */
export const INPUT_ROLES = ["user", "assistant", "system", "developer"] as const;
export type InputRole = (typeof INPUT_ROLES)[number];

const textPartSchema = z.looseObject({
  type: z.enum(["input_text", "output_text"], {
    error: "only text parts (`input_text`, `output_text`) are supported",
  }),
  text: z.string(),
});

export const inputMessageSchema = z.looseObject({
  type: z
    .literal("message", { error: "only message items (`type: message`) are supported" })
    .optional(),
  role: z.enum(INPUT_ROLES, { error: `role must be one of ${INPUT_ROLES.join(", ")}` }),
  content: z.union([z.string(), z.array(textPartSchema).min(1)], {
    error: "content must be a string or a non-empty list of text parts",
  }),
});
export type InputMessage = z.infer<typeof inputMessageSchema>;

export const inputItemsSchema = z.array(inputMessageSchema).min(1, "input must not be empty");

/** One turn of a conversation, its content as plain text. */
export interface ChatMessage {
  role: InputRole;
  content: string;
}

export function chatMessagesOf(items: readonly InputMessage[]): ChatMessage[] {
  return items.map((item) => ({
    role: item.role,
    content:
      typeof item.content === "string"
        ? item.content
        : item.content.map((part) => part.text).join(""),
  }));
}

/** The text of a conversation as one string, for what reads text rather than turns. */
export function conversationText(messages: readonly ChatMessage[]): string {
  return messages.map((m) => m.content).join("\n\n");
}
