/**
 * Section (a)'s request, the same in the bench (run.ts) and its tools
 * (gc-trace.ts, thread-split.ts): one greedy answer of a fixed length, so
 * that a streamed and a whole request do the same work.
 */
export function storyRequest(model: string, maxOutputTokens: number) {
  return {
    model,
    input: "Write a short story about a lighthouse keeper.",
    temperature: 0,
    max_output_tokens: maxOutputTokens,
  };
}
