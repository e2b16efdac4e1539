import type { V1Endpoint, V1EndpointSlice } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { endpointUrl, endpointsFromSlices } from "../../../gateway/registry/slice-endpoints.js";
import { isReady } from "../../../lib/kube/endpoint-slices.js";

function slice(
  name: string,
  service: string,
  endpoints: V1Endpoint[],
  ports: V1EndpointSlice["ports"] = [{ name: "http", port: 8080 }],
  addressType = "IPv4",
): V1EndpointSlice {
  return {
    addressType,
    metadata: { name, namespace: "ns", labels: { "kubernetes.io/service-name": service } },
    endpoints,
    ports,
  };
}

const ready = (address: string): V1Endpoint => ({
  addresses: [address],
  conditions: { ready: true },
});

describe("endpointsFromSlices", () => {
  it("lists ready endpoints of every slice of the Service, de-duplicated and sorted", () => {
    expect(
      endpointsFromSlices(
        [
          slice("m-a", "m", [ready("10.250.0.3"), ready("10.250.0.1")]),
          slice("m-b", "m", [ready("10.250.0.2"), ready("10.250.0.1")]),
        ],
        "m",
      ),
    ).toEqual(["http://10.250.0.1:8080", "http://10.250.0.2:8080", "http://10.250.0.3:8080"]);
  });

  it("drops not-ready and terminating endpoints; a missing ready condition means ready", () => {
    expect(
      endpointsFromSlices(
        [
          slice("m-a", "m", [
            { addresses: ["10.250.0.1"], conditions: { ready: false, serving: true } },
            { addresses: ["10.250.0.2"], conditions: { ready: true, terminating: true } },
            { addresses: ["10.250.0.3"], conditions: {} },
            { addresses: ["10.250.0.4"] },
          ]),
        ],
        "m",
      ),
    ).toEqual(["http://10.250.0.3:8080", "http://10.250.0.4:8080"]);
  });

  it("uses the port named http of each slice, and skips slices without one", () => {
    expect(
      endpointsFromSlices(
        [
          slice(
            "m-a",
            "m",
            [ready("10.250.0.1")],
            [
              { name: "metrics", port: 9090 },
              { name: "http", port: 8081 },
            ],
          ),
          slice("m-b", "m", [ready("10.250.0.2")], [{ name: "metrics", port: 9090 }]),
          slice("m-c", "m", [ready("10.250.0.3")], [{ name: "http" }]),
          slice("m-d", "m", [ready("10.250.0.4")], []),
        ],
        "m",
      ),
    ).toEqual(["http://10.250.0.1:8081"]);
  });

  it("ignores slices of other Services and endpoints without an address", () => {
    expect(
      endpointsFromSlices(
        [
          slice("other", "other", [ready("10.250.0.9")]),
          slice("m-a", "m", [{ addresses: [], conditions: { ready: true } }]),
        ],
        "m",
      ),
    ).toEqual([]);
  });

  it("dials one address per endpoint, and brackets IPv6", () => {
    expect(
      endpointsFromSlices(
        [slice("m-a", "m", [{ addresses: ["fd00::1", "fd00::2"] }], undefined, "IPv6")],
        "m",
      ),
    ).toEqual(["http://[fd00::1]:8080"]);
    expect(endpointUrl("10.250.0.1", 80, "IPv4")).toBe("http://10.250.0.1:80");
  });

  it("reads readiness as kube-proxy does", () => {
    expect(isReady({ addresses: ["a"] })).toBe(true);
    expect(isReady({ addresses: ["a"], conditions: { ready: false } })).toBe(false);
    expect(isReady({ addresses: ["a"], conditions: { terminating: true } })).toBe(false);
  });
});
