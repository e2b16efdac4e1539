import { createServer } from "node:http";
import type { Tree } from "./helpers.js";
import { sha256 } from "./helpers.js";
import type { RecordedRequest } from "./model-server.js";
import { listen, serveBytes } from "./model-server.js";

export interface HubRepo {
  /** branch or tag name → commit sha */
  refs: Record<string, string>;
  /** commit sha → files at that commit */
  commits: Record<string, Tree>;
  /** Files that only an authenticated caller may see. */
  private?: boolean;
  /** Bytes served in place of the committed ones (listing unchanged): a corrupt mirror. */
  served?: Tree;
}

export interface HubStandIn {
  endpoint: string;
  requests: RecordedRequest[];
}

/** Files at least this big are answered like LFS files: a 302 to a CDN path. */
const LFS_THRESHOLD = 1000;

/**
 * The two hub endpoints the fetch uses, on 127.0.0.1:
 *   GET /api/models/{org}/{name}/revision/{rev}  → { sha, siblings: [{ rfilename, size, lfs? }] }
 *   GET /{org}/{name}/resolve/{rev}/{path}       → the bytes (large files via a 302 to /cdn/…)
 */
export async function startHubStandIn(
  repos: Record<string, HubRepo>,
  options: { token?: string } = {},
): Promise<HubStandIn> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://hub");
    requests.push({
      method: req.method ?? "GET",
      path: url.pathname + url.search,
      range: req.headers.range,
      authorization: req.headers.authorization,
    });
    const commitFor = (repo: HubRepo, rev: string): Tree | undefined =>
      repo.commits[repo.refs[rev] ?? rev];

    const info = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    const cdn = /^\/cdn\/([^/]+\/[^/]+)\/([^/]+)\/(.+)$/.exec(url.pathname);
    const name = info?.[1] ?? resolve?.[1] ?? cdn?.[1];
    const repo = name === undefined ? undefined : repos[name];
    if (repo?.private && req.headers.authorization !== `Bearer ${options.token}`) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}');
      return;
    }
    if (info && repo) {
      const rev = decodeURIComponent(info[2] ?? "");
      const files = commitFor(repo, rev);
      if (!files) {
        res.writeHead(404).end('{"error":"Revision Not Found"}');
        return;
      }
      const siblings = Object.entries(files).map(([rfilename, data]) => ({
        rfilename,
        size: data.length,
        ...(data.length >= LFS_THRESHOLD
          ? { lfs: { sha256: sha256(data), size: data.length } }
          : {}),
      }));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: name, sha: repo.refs[rev] ?? rev, siblings }));
      return;
    }
    const found = resolve ?? cdn;
    if (found && repo) {
      const path = decodeURIComponent(found[3] ?? "");
      const data = commitFor(repo, decodeURIComponent(found[2] ?? ""))?.[path];
      if (!data) {
        res.writeHead(404).end("Entry not found");
        return;
      }
      if (resolve && data.length >= LFS_THRESHOLD) {
        res.writeHead(302, { location: `/cdn/${found[1]}/${found[2]}/${found[3]}` }).end();
        return;
      }
      serveBytes(req, res, repo.served?.[path] ?? data, true);
      return;
    }
    res.writeHead(404).end("Repository not found");
  });
  return { endpoint: await listen(server, "http"), requests };
}
