import { request as httpRequest } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
import type { KubeConfig, KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";

/**
 * A LIST as plain JSON. The client library's typed list methods turn every
 * item into instances of its generated model classes, which carry a property
 * for every field the type could have; for a cache of hundreds of pods and
 * Deployments that is several times the memory of the JSON itself. The
 * request is authenticated exactly as the library's own (its agent and
 * headers from the kubeconfig) and pages through `continue` tokens.
 */
const PAGE_SIZE = 500;

export async function rawList<T extends KubernetesObject>(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | undefined> = {},
): Promise<KubernetesListObject<T>> {
  const items: T[] = [];
  let resourceVersion = "";
  let token: string | undefined;
  do {
    const page = await getJson<KubernetesListObject<T>>(kc, path, {
      ...query,
      limit: String(PAGE_SIZE),
      continue: token,
    });
    items.push(...page.items);
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    token = page.metadata?._continue ?? (page.metadata as { continue?: string })?.continue;
  } while (token);
  return { apiVersion: "v1", kind: "List", metadata: { resourceVersion }, items };
}

async function getJson<T>(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | undefined>,
): Promise<T> {
  return JSON.parse(await getText(kc, path, query)) as T;
}

/** A GET of any API server path (e.g. /metrics), authenticated from the kubeconfig. */
export async function getText(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | undefined> = {},
): Promise<string> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  const url = new URL(cluster.server + path);
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  // The library's own TLS material, credentials and (cached, keep-alive) agent.
  const options: RequestOptions = { headers: {} };
  await kc.applyToHTTPSOptions(options);
  const headers = { ...(options.headers as Record<string, string>), accept: "application/json" };
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise<string>((resolve, reject) => {
    const req = send(url, { ...options, method: "GET", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        if (res.statusCode !== 200) {
          const error = new Error(
            `GET ${url.pathname}: HTTP ${res.statusCode}: ${body.slice(0, 300)}`,
          );
          Object.assign(error, { statusCode: res.statusCode });
          return reject(error);
        }
        resolve(body);
      });
    });
    req.setTimeout(60_000, () => req.destroy(new Error(`GET ${url.pathname}: timed out`)));
    req.on("error", reject);
    req.end();
  });
}
