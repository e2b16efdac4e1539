import type { Logger } from "../../lib/logger.js";
import type { KeyStore } from "./key-store.js";
import type { AuthenticatedKey } from "./keys-file.js";

/** The shape the routes consume (`ApiKeyAuth` in gateway/ports.ts). */
export interface ApiKeyAuthAdapter {
  authenticate(rawKey: string | undefined): AuthenticatedKey | null;
  mayUseProject(identity: AuthenticatedKey, projectId: string): boolean;
}

/**
 * Adapts a KeyStore to the routes' yes/no interface. The client learns only
 * "invalid API key" (a 401 that does not say which check failed); the reason
 * is logged here for operators, with the key id when one is known and never
 * the key.
 */
export function createApiKeyAuth(store: KeyStore, logger?: Logger): ApiKeyAuthAdapter {
  return {
    authenticate(rawKey) {
      const result = store.authenticate(rawKey);
      if (result.ok) return result.key;
      // "missing" and "malformed" are routine noise (scanners, typos): debug.
      if (result.reason === "revoked" || result.reason === "unknown") {
        logger?.info({ reason: result.reason, keyId: result.keyId }, "API key refused");
      } else {
        logger?.debug({ reason: result.reason }, "API key refused");
      }
      return null;
    },
    mayUseProject(identity, projectId) {
      const decision = store.authorizeProject(identity, projectId);
      if (!decision.ok) {
        logger?.info(
          { keyId: identity.id, account: identity.account },
          "project not allowed for API key",
        );
      }
      return decision.ok;
    },
  };
}
