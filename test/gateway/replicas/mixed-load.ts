import { GEN } from "../conformance/support.js";
import type { Platform } from "../support/platform.js";
import type { Replica } from "./replica-set.js";

/**
 * Client load on both routes spread round robin over replicas, mostly
 * requests that should be answered and some that must be refused (a
 * revoked key, a rate-limited key, a bad body, a bad signature, an agent
 * without allowance). Every request carries its own `x-request-id`, which
 * the ledger keeps beside the response id, so that every ledger row can be
 * traced back to the one client request it came from.
 */
export type RequestKind =
  "api" | "pay" | "revoked-key" | "limited-key" | "bad-body" | "bad-signature" | "no-allowance";

export interface Outcome {
  index: number;
  requestId: string;
  kind: RequestKind;
  route: "/v1/responses" | "/pay/v1/responses";
  replica: number;
  /** 0: the connection failed (the replica was killed, or was down). */
  status: number;
  responseId?: string;
  usage?: { input_tokens: number; output_tokens: number };
  startedAt: number;
  endedAt: number;
}

export const BROKE_AGENT = "agent-without-allowance";

/** Mostly answerable requests, one refusal of each kind every 20. */
export function kindOf(index: number): RequestKind {
  const refusals: Partial<Record<number, RequestKind>> = {
    3: "revoked-key",
    7: "limited-key",
    11: "bad-body",
    13: "bad-signature",
    17: "no-allowance",
  };
  return refusals[index % 20] ?? (index % 2 === 0 ? "api" : "pay");
}

function requestOf(
  p: Platform,
  kind: RequestKind,
  index: number,
  requestId: string,
): { path: Outcome["route"]; body: string; headers: Record<string, string> } {
  const body = JSON.stringify({
    ...GEN,
    input: `replica load ${index}`,
    max_output_tokens: 1 + (index % 4),
    ...(kind === "bad-body" ? { max_output_tokens: -1 } : {}),
  });
  const common = { "content-type": "application/json", "x-request-id": requestId };
  const apiKey = (key: string) => ({
    path: "/v1/responses" as const,
    body,
    headers: { ...common, "x-api-key": key },
  });
  const paid = (signature: string, agent: string) => ({
    path: "/pay/v1/responses" as const,
    body,
    headers: { ...common, "pay-signature": signature, "pay-agent-id": agent },
  });
  switch (kind) {
    case "api":
    case "bad-body":
      return apiKey(p.keys.acme.key);
    case "revoked-key":
      return apiKey(p.keys.revoked.key);
    case "limited-key":
      return apiKey(p.keys.limited.key);
    case "pay":
      return paid(p.sign(body), "agent-load");
    case "bad-signature":
      return paid(p.sign(`${body} `), "agent-load");
    case "no-allowance":
      return paid(p.sign(body), BROKE_AGENT);
  }
}

export interface MixedLoad {
  outcomes: Outcome[];
  /** Answers with status 200 so far. */
  answered(): number;
  /** Stops sending and waits for the requests in flight. */
  stop(): Promise<Outcome[]>;
}

/**
 * Starts `clients` concurrent clients, each sending one request after the
 * other to `replicas()[index % n]` (read at send time, so a replica
 * restarted in place takes its share again), until `stop()`; with
 * `pauseMs`, each client waits that long between requests.
 */
export function startMixedLoad(
  p: Platform,
  replicas: () => readonly Replica[],
  options: { clients: number; tag: string; pauseMs?: number },
): MixedLoad {
  const outcomes: Outcome[] = [];
  let next = 0;
  let stopping = false;
  let answered = 0;
  const client = async () => {
    while (!stopping) {
      const index = next++;
      const kind = kindOf(index);
      const requestId = `${options.tag}-${index}`;
      const all = replicas();
      const replica = all[index % all.length]!;
      const request = requestOf(p, kind, index, requestId);
      const outcome: Outcome = {
        index,
        requestId,
        kind,
        route: request.path,
        replica: replica.index,
        status: 0,
        startedAt: Date.now(),
        endedAt: 0,
      };
      try {
        const res = await fetch(`${replica.url}${request.path}`, {
          method: "POST",
          headers: request.headers,
          body: request.body,
        });
        const text = await res.text();
        outcome.status = res.status;
        if (res.status === 200) {
          const answer = JSON.parse(text) as { id: string; usage: Outcome["usage"] };
          outcome.responseId = answer.id;
          outcome.usage = answer.usage;
          answered += 1;
        }
      } catch {
        // The connection failed: never answered.
      }
      outcome.endedAt = Date.now();
      outcomes.push(outcome);
      if (options.pauseMs) await new Promise((resolve) => setTimeout(resolve, options.pauseMs));
    }
  };
  const running = Promise.all(Array.from({ length: options.clients }, client));
  return {
    outcomes,
    answered: () => answered,
    async stop() {
      stopping = true;
      await running;
      return outcomes;
    },
  };
}
