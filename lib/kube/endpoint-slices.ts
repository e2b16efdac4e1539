import type { V1Endpoint, V1EndpointSlice } from "@kubernetes/client-node";

/**
 * What an EndpointSlice says about which pods take traffic: the one rule
 * the gateway routes by and the operator judges a model Ready by, so the two
 * can never disagree.
 */

/** Set on every EndpointSlice by whoever manages it; names the Service it belongs to. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

export function serviceNameOf(slice: V1EndpointSlice): string | undefined {
  return slice.metadata?.labels?.[SERVICE_NAME_LABEL];
}

/**
 * Whether an endpoint should get new requests. The API says a missing
 * `ready` means ready (kube-proxy reads it so), and a terminating pod is
 * never sent new work, even when its Service publishes not-ready addresses.
 */
export function isReady(endpoint: V1Endpoint): boolean {
  const conditions = endpoint.conditions ?? {};
  return conditions.ready !== false && conditions.terminating !== true;
}

/**
 * The address to dial for each ready endpoint of a Service, across all its
 * slices: one endpoint is one pod, and like kube-proxy only its first
 * address is used. De-duplicated (an address may briefly sit in two slices).
 */
export function readyAddresses(
  slices: Iterable<V1EndpointSlice>,
  serviceName: string,
): Set<string> {
  const addresses = new Set<string>();
  for (const slice of slices) {
    if (serviceNameOf(slice) !== serviceName) continue;
    for (const endpoint of slice.endpoints ?? []) {
      const address = endpoint.addresses?.[0];
      if (address && isReady(endpoint)) addresses.add(address);
    }
  }
  return addresses;
}
