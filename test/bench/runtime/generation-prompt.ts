import type { ChatMessage } from "./peer.js";

/**
 * Candidate chat prompts of about thirty tokens. bench-gpt has random
 * weights, so whether greedy decoding meets an end-of-sequence token within
 * 64 steps depends on the prompt: generation.ts takes the first candidate
 * whose greedy continuation has none, so that every engine makes exactly the
 * same number of tokens.
 */
export const PROMPT_CANDIDATES: ReadonlyArray<ChatMessage[]> = [
  [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Tell me a short story about a fox who learns to sail a boat." },
  ],
  [
    { role: "system", content: "Answer briefly." },
    { role: "user", content: "Why is the sky blue on a clear day, and red at sunset?" },
  ],
  [
    { role: "system", content: "You write poems." },
    { role: "user", content: "Write a poem about the sea, the wind and an old lighthouse keeper." },
  ],
  [
    { role: "system", content: "You are a travel guide." },
    { role: "user", content: "Describe a quiet walk through an old city on a rainy morning." },
  ],
  [
    { role: "system", content: "You explain science to children." },
    { role: "user", content: "How do plants turn sunlight, water and air into food?" },
  ],
];

/** The runtime's request for the same messages: system as instructions, user as input. */
export function responsesBody(
  model: string,
  messages: readonly ChatMessage[],
  maxOutputTokens: number,
): string {
  const system = messages.find((m) => m.role === "system");
  const user = messages.find((m) => m.role === "user");
  return JSON.stringify({
    model,
    instructions: system?.content,
    input: user?.content ?? "",
    max_output_tokens: maxOutputTokens,
    temperature: 0,
  });
}
