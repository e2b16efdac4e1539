import { describe, expect, it } from "vitest";
import { parseGatewayConfig } from "../../../gateway/config.js";

describe("gateway settings of the shared state", () => {
  it("reads the Valkey URL, replicas and token limit from flags or MODELGATE_ variables", () => {
    const fromEnv = parseGatewayConfig(
      {},
      {
        MODELGATE_VALKEY_URL: "rediss://valkey.example.test:6380/2",
        MODELGATE_REPLICAS: "3",
        MODELGATE_RATE_LIMIT_TOKENS_PER_MINUTE: "90000",
      },
    );
    expect(fromEnv).toMatchObject({
      valkeyUrl: "rediss://valkey.example.test:6380/2",
      replicas: 3,
      rateLimitTokensPerMinute: 90000,
    });
    const defaults = parseGatewayConfig({}, {});
    expect(defaults.valkeyUrl).toBeUndefined();
    expect(defaults.replicas).toBe(1);
    expect(defaults.rateLimitTokensPerMinute).toBeUndefined();
  });

  it("refuses a URL of another scheme and a replica count of 0, naming the setting", () => {
    expect(() => parseGatewayConfig({ valkeyUrl: "http://valkey:6379" }, {})).toThrow(
      /invalid setting valkeyUrl \(--valkey-url \/ MODELGATE_VALKEY_URL\): must be a redis:\/\/ or rediss:\/\/ URL/,
    );
    expect(() => parseGatewayConfig({ replicas: "0" }, {})).toThrow(/--replicas/);
  });
});
