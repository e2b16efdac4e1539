import { z } from "zod";
import { FetchError } from "./errors.js";
import { getOk, getRange } from "./http-client.js";
import { safeRelativePath } from "./safe-path.js";
import type { ModelSource, OpenedFile, SourceContext, SourceListing } from "./source.js";

export const DEFAULT_HF_ENDPOINT = "https://huggingface.co";
export const DEFAULT_HF_REVISION = "main";

/** The part of the hub's model-info answer we rely on; extra fields are ignored. */
const modelInfoSchema = z.object({
  sha: z.string().optional(),
  siblings: z.array(
    z.object({
      rfilename: z.string(),
      size: z.number().int().nonnegative().optional(),
      lfs: z.object({ sha256: z.string().optional(), size: z.number().optional() }).optional(),
    }),
  ),
});

/**
 * `hf://org/name@revision` against the hub (or a mirror at `endpoint`).
 * The listing pins the revision to the commit sha the hub answers with, and
 * every file is resolved at that sha, so a branch that moves mid-download
 * cannot give us files from two commits.
 */
export function createHfSource(
  repo: string,
  uriRevision: string | undefined,
  ctx: SourceContext,
): ModelSource {
  const endpoint = new URL(ctx.endpoint ?? DEFAULT_HF_ENDPOINT);
  if (!endpoint.pathname.endsWith("/")) endpoint.pathname += "/";
  const requested = ctx.revision ?? uriRevision ?? DEFAULT_HF_REVISION;
  const headers: Record<string, string> = ctx.hfToken
    ? { authorization: `Bearer ${ctx.hfToken}` }
    : {};
  const hint = ctx.hfToken ? "" : "a private or gated repository needs HF_TOKEN";
  let pinned = requested;

  return {
    description: `hf://${repo}`,
    async list(signal): Promise<SourceListing> {
      // blobs=true adds sizes and the LFS sha256 of large files: free checks.
      const url = new URL(
        `api/models/${repo}/revision/${encodeURIComponent(requested)}?blobs=true`,
        endpoint,
      );
      const response = await getOk(url, { dispatcher: ctx.dispatcher, headers, signal, hint });
      const parsed = modelInfoSchema.safeParse(await response.body.json().catch(() => undefined));
      if (!parsed.success) {
        throw new FetchError(
          "download_failed",
          `GET ${url.origin}${url.pathname}: the answer is not a model info document`,
        );
      }
      pinned = parsed.data.sha ?? requested;
      return {
        revision: pinned,
        files: parsed.data.siblings.map((s) => ({
          path: s.rfilename,
          size: s.size ?? s.lfs?.size,
          sha256: s.lfs?.sha256,
        })),
      };
    },
    open(path, start, signal): Promise<OpenedFile> {
      const encoded = safeRelativePath(path).split("/").map(encodeURIComponent).join("/");
      const url = new URL(`${repo}/resolve/${encodeURIComponent(pinned)}/${encoded}`, endpoint);
      return getRange(url, start, { dispatcher: ctx.dispatcher, headers, signal, hint });
    },
  };
}
