import type { V1EndpointSlice } from "@kubernetes/client-node";
import { isReady, serviceNameOf } from "../../lib/kube/endpoint-slices.js";
import { HTTP_PORT_NAME } from "../../crds/child-names.js";

/**
 * A model's ready endpoints, read from the EndpointSlices of its Service
 * alone: the gateway never reads pods or Services. Pure, so every rule of
 * which address receives traffic is tested without a cluster.
 */

/** `http://host:port`, with IPv6 addresses in brackets as URLs require. */
export function endpointUrl(address: string, port: number, addressType: string): string {
  const host = addressType === "IPv6" || address.includes(":") ? `[${address}]` : address;
  return `http://${host}:${port}`;
}

function httpPortOf(slice: V1EndpointSlice): number | undefined {
  const port = slice.ports?.find((p) => (p.name ?? "") === HTTP_PORT_NAME)?.port;
  // A slice port without a number means "all ports": nothing to dial.
  return typeof port === "number" && port > 0 ? port : undefined;
}

/**
 * Base URLs of the ready endpoints of one Service, across all its slices
 * (a Service has several once it has more than 100 endpoints, or during a
 * rollout), de-duplicated (an address may briefly sit in two slices) and
 * sorted, so an unchanged set compares equal.
 */
export function endpointsFromSlices(
  slices: Iterable<V1EndpointSlice>,
  serviceName: string,
): string[] {
  const urls = new Set<string>();
  for (const slice of slices) {
    if (serviceNameOf(slice) !== serviceName) continue;
    const port = httpPortOf(slice);
    if (port === undefined) continue;
    for (const endpoint of slice.endpoints ?? []) {
      if (!isReady(endpoint)) continue;
      // One endpoint is one pod; like kube-proxy, dial its first address only.
      const address = endpoint.addresses?.[0];
      if (address) urls.add(endpointUrl(address, port, slice.addressType));
    }
  }
  return [...urls].sort();
}
