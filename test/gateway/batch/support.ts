import OpenAI, { toFile } from "openai";
import type { Batch } from "openai/resources/batches";

/** Helpers the batch tests share: input files as JSONL and waiting for a status. */
export interface InputLine {
  custom_id: string;
  method?: string;
  url?: string;
  body: Record<string, unknown>;
}

export function jsonlOf(lines: readonly (InputLine | string)[]): Buffer {
  return Buffer.from(
    lines
      .map((line) =>
        typeof line === "string"
          ? line
          : JSON.stringify({ method: "POST", url: "/v1/responses", ...line }),
      )
      .join("\n") + "\n",
  );
}

export const gptLine = (n: number): InputLine => ({
  custom_id: `gpt-${n}`,
  body: { model: "tiny-gpt", input: `Hello ${n}`, max_output_tokens: 4, temperature: 0 },
});

export const nliLine = (n: number): InputLine => ({
  custom_id: `nli-${n}`,
  body: {
    model: "tiny-nli",
    input: `The team scored goal ${n}`,
    categories: ["sports", "cooking"],
  },
});

export function openaiClient(url: string, key: string): OpenAI {
  return new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0, timeout: 30_000 });
}

export async function submit(
  client: OpenAI,
  lines: readonly (InputLine | string)[],
  metadata?: Record<string, string>,
): Promise<Batch> {
  const file = await client.files.create({
    file: await toFile(jsonlOf(lines), "input.jsonl"),
    purpose: "batch",
  });
  return client.batches.create({
    input_file_id: file.id,
    endpoint: "/v1/responses",
    completion_window: "24h",
    ...(metadata ? { metadata } : {}),
  });
}

/** Polls `batches.retrieve` until `done` holds (or the time is up: the last batch seen). */
export async function waitFor(
  client: OpenAI,
  id: string,
  done: (batch: Batch) => boolean,
  timeoutMs = 60_000,
): Promise<Batch> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const batch = await client.batches.retrieve(id);
    if (done(batch) || Date.now() > until) return batch;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export const TERMINAL = new Set(["completed", "failed", "expired", "cancelled"]);
export const finished = (batch: Batch) => TERMINAL.has(batch.status);

/** What the tests read of an output or error line. */
export interface OutputLine {
  id: string;
  custom_id: string;
  response: {
    status_code: number;
    request_id: string;
    body: {
      id?: string;
      object?: string;
      model?: string;
      usage?: { input_tokens: number; output_tokens: number };
      error?: { code: string };
    } & Record<string, unknown>;
  } | null;
  error: { code: string; message: string } | null;
}

/** The JSON lines of a file, read with `files.content`. */
export async function linesOf(
  client: OpenAI,
  fileId: string | null | undefined,
): Promise<OutputLine[]> {
  if (!fileId) return [];
  const text = await (await client.files.content(fileId)).text();
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as OutputLine);
}
