import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../support/cluster.js";
import { venvProgram } from "../../support/python-venv.js";
import { expectedOrder } from "../../support/sse-events.js";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * The official Python `openai` client (installed by test/python/venv.sh into
 * .cache/pyvenv; `.ci/run` runs it) iterating a stream through the gateway,
 * as a new user would (test/python/stream_client.py).
 */
const PYTHON = venvProgram("python", "the Python client");

interface PythonRun {
  types: string[];
  sequence: number[];
  text: string;
  terminal_text: string | null;
  usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null;
  status: string | null;
}

describe.runIf(PYTHON !== undefined)(
  "the Python openai client streaming through the gateway",
  () => {
    let p: Platform;
    beforeAll(async () => {
      p = await startPlatform();
    });
    afterAll(async () => p?.close());

    it("iterates the events to the end: in order, numbered, the greedy text and usage", async () => {
      const env = {
        ...process.env,
        MODELGATE_BASE_URL: `${p.url}/v1`,
        MODELGATE_API_KEY: p.keys.acme.key,
        MODELGATE_MODEL: "tiny-gpt",
      };
      const { stdout } = await promisify(execFile)(
        PYTHON!,
        [join(REPO_ROOT, "test", "python", "stream_client.py")],
        { env, timeout: 60_000 },
      );
      const run = JSON.parse(stdout) as PythonRun;
      const whole = await new OpenAI({
        apiKey: p.keys.acme.key,
        baseURL: `${p.url}/v1`,
      }).responses.create({
        model: "tiny-gpt",
        input: "Tell me about the sea",
        max_output_tokens: 24,
        temperature: 0,
      });
      const deltas = run.types.filter((t) => t === "response.output_text.delta").length;
      expect(run.types).toEqual(expectedOrder(deltas, `response.${whole.status}`));
      expect(run.sequence).toEqual(run.types.map((_t, i) => i));
      expect(run.text).toBe(whole.output_text);
      expect(run.terminal_text).toBe(whole.output_text);
      expect(run.usage).toMatchObject({
        input_tokens: whole.usage!.input_tokens,
        output_tokens: whole.usage!.output_tokens,
      });
      expect(run.status).toBe(whole.status);
    });
  },
);
