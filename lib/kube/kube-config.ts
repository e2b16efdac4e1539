import { createHash } from "node:crypto";
import type { AgentOptions } from "node:https";
import { KubeConfig, type Cluster } from "@kubernetes/client-node";
import type { Dispatcher } from "undici";

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

type MakeDispatcher = (cluster: Cluster | null, options: AgentOptions) => Dispatcher | undefined;

/**
 * A KubeConfig whose requests share one keep-alive connection pool. The
 * library (2.x) builds a new undici dispatcher for every API call, so each
 * call opened a fresh TCP and TLS connection: at hundreds of writes a second
 * that handshake was a large share of the API server's and the operator's
 * CPU. Dispatchers are kept by the TLS material and proxy they were built
 * for, so a rotated client certificate or CA gets a new pool (the old one
 * drains and closes); bearer tokens travel in headers, set per request, so a
 * refreshed service-account token is picked up as before.
 *
 * The library's own factory is wrapped, not rewritten: what a dispatcher is
 * made of stays the library's decision.
 */
export class PooledKubeConfig extends KubeConfig {
  private pooled: { key: string; dispatcher: Dispatcher } | undefined;

  constructor() {
    super();
    const self = this as unknown as { createDispatcher: MakeDispatcher };
    const make = self.createDispatcher.bind(this);
    self.createDispatcher = (cluster, options) => this.pool(cluster, options, make);
  }

  private pool(
    cluster: Cluster | null,
    options: AgentOptions,
    make: MakeDispatcher,
  ): Dispatcher | undefined {
    const key = fingerprint(this.createDispatcherOptions(cluster, options));
    if (this.pooled?.key === key) return this.pooled.dispatcher;
    const dispatcher = make(cluster, options);
    if (!dispatcher) return undefined;
    const previous = this.pooled;
    this.pooled = { key, dispatcher };
    // Requests in flight on the old pool finish; then it closes.
    if (previous) void previous.dispatcher.close().catch(() => undefined);
    return dispatcher;
  }
}

/** A stable digest of dispatcher options; key material is hashed, never kept as text. */
function fingerprint(options: unknown): string {
  const json = JSON.stringify(options, (_key, value: unknown) => {
    // Buffers reach the replacer already turned into { type: "Buffer", data }.
    const asBuffer = value as { type?: string; data?: number[] };
    if (asBuffer?.type === "Buffer" && Array.isArray(asBuffer.data)) {
      return `buffer:${Buffer.from(asBuffer.data).toString("base64")}`;
    }
    return value;
  });
  return createHash("sha256").update(json).digest("hex");
}
