import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent, type AgentOptions } from "node:https";
import { KubeConfig, type RequestContext } from "@kubernetes/client-node";

/**
 * The API server's address and credentials, found the way kubectl and
 * controller-runtime find them: an explicit kubeconfig file, else
 * $KUBECONFIG, else the pod's service account (in-cluster).
 */
export function loadKubeConfig(kubeconfigPath?: string): KubeConfig {
  const kc = new PooledKubeConfig();
  const path = kubeconfigPath ?? process.env.KUBECONFIG;
  if (path !== undefined && path !== "") {
    kc.loadFromFile(path);
  } else if (process.env.KUBERNETES_SERVICE_HOST !== undefined) {
    kc.loadFromCluster();
  } else {
    throw new Error(
      "no Kubernetes API server: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account",
    );
  }
  return kc;
}

/**
 * A KubeConfig whose requests share one keep-alive connection pool. The
 * library builds a new agent for every request, so each API call opened a
 * fresh TCP and TLS connection (and sent `Connection: close`): at hundreds
 * of writes a second that handshake was a large share of the API server's
 * and the operator's CPU. The pooled agent is rebuilt when the TLS material
 * changes (a rotated client certificate or CA); bearer tokens travel in
 * headers, which are still set per request, so a refreshed service-account
 * token is picked up as before. Proxy agents are left as the library makes them.
 */
export class PooledKubeConfig extends KubeConfig {
  private pooled: { agent: HttpAgent; options: AgentOptions } | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getAgent();
    if (fresh) context.setAgent(this.pool(fresh));
  }

  override async applyToHTTPSOptions(
    opts: Parameters<KubeConfig["applyToHTTPSOptions"]>[0],
  ): Promise<void> {
    await super.applyToHTTPSOptions(opts);
    const holder = opts as { agent?: unknown };
    if (holder.agent instanceof HttpAgent) holder.agent = this.pool(holder.agent);
  }

  private pool(fresh: HttpAgent): HttpAgent {
    const isHttps = fresh instanceof HttpsAgent;
    if (!isHttps && fresh.constructor !== HttpAgent) return fresh;
    const options = (fresh as HttpAgent & { options: AgentOptions }).options;
    if (this.pooled && sameTls(this.pooled.options, options)) {
      fresh.destroy();
      return this.pooled.agent;
    }
    const settings = { ...options, keepAlive: true, keepAliveMsecs: 30_000 };
    const agent = isHttps ? new HttpsAgent(settings) : new HttpAgent(settings);
    fresh.destroy();
    this.pooled = { agent, options };
    return agent;
  }
}

const TLS_FIELDS = [
  "ca",
  "cert",
  "key",
  "pfx",
  "passphrase",
  "rejectUnauthorized",
  "servername",
] as const;

function sameTls(a: AgentOptions, b: AgentOptions): boolean {
  return TLS_FIELDS.every((field) => sameValue(a[field], b[field]));
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => sameValue(item, b[i]));
  }
  return a === b;
}
