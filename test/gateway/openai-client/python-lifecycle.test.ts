import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../support/cluster.js";
import { venvProgram } from "../../support/python-venv.js";
import { jsonlOf, nliLine } from "../batch/support.js";
import { startPlatform, type Platform } from "../support/platform.js";

/**
 * The official Python client around a stored response and a batch
 * (test/python/lifecycle_client.py). It sends `Content-Type:
 * application/json` with an empty body on DELETE and cancel, which the
 * gateway once refused as a body that is not JSON.
 */
const PYTHON = venvProgram("python", "the Python client");

interface Seen {
  retrieved_id: string;
  input_texts: string[];
  cancel: [number, string] | "cancelled";
  after_delete: number | "found";
  batch_status: string;
  batch_counts: { total: number; completed: number; failed: number };
  output_lines: string[];
  cancel_status: string;
  file_deleted: boolean;
}

describe.runIf(PYTHON !== undefined)(
  "the Python openai client around responses and batches",
  () => {
    let p: Platform;
    beforeAll(async () => {
      p = await startPlatform();
    });
    afterAll(async () => p?.close());

    it("retrieves, lists, deletes; runs, cancels and deletes: every bodyless call answered", async () => {
      const lines = [0, 1, 2, 3, 4].map(nliLine);
      const { stdout } = await promisify(execFile)(
        PYTHON!,
        [join(REPO_ROOT, "test", "python", "lifecycle_client.py")],
        {
          env: {
            ...process.env,
            MODELGATE_BASE_URL: `${p.url}/v1`,
            MODELGATE_API_KEY: p.keys.acme.key,
            MODELGATE_BATCH_LINES: jsonlOf(lines).toString(),
          },
          timeout: 90_000,
        },
      );
      const seen = JSON.parse(stdout) as Seen;
      expect(seen.input_texts).toEqual(["Hello"]);
      expect(seen.cancel).toEqual([400, "response_not_cancellable"]);
      expect(seen.after_delete).toBe(404);
      expect(seen.batch_status).toBe("completed");
      expect(seen.batch_counts).toEqual({ total: 5, completed: 5, failed: 0 });
      expect(seen.output_lines.sort()).toEqual(lines.map((l) => l.custom_id).sort());
      // Cancelled at once: still validating or running, or already stopping.
      expect(["cancelling", "cancelled"]).toContain(seen.cancel_status);
      expect(seen.file_deleted).toBe(true);
    });
  },
);
