import type { Caller } from "./caller.js";

/**
 * Whose a stored response is, from what the gateway verified and nothing
 * the caller merely claims:
 *
 * - API-key route: the key's account and the project the request was scoped
 *   to (`x-project-id`, which the key was checked to be allowed). Keys of one
 *   account share the account's responses within a project, as OpenAI's
 *   project-scoped keys do; a request with no project sees only responses
 *   made with no project.
 * - Payment route: the signing key (`kid`) of the `pay-signature` the
 *   provider issued. `pay-agent-id` is unsigned and decides nothing; a
 *   provider that signs each agent's requests under its own `kid` gets
 *   per-agent isolation (docs/stored-responses.md).
 *
 * The two routes never share an owner: a prefix keeps them apart.
 */
export function ownerOf(caller: Caller): string {
  if (caller.kind === "api-key") return `key:${caller.account}/${caller.project ?? ""}`;
  return `pay:${caller.signedBy.kid}`;
}
