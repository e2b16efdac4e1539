import { describe, expect, it } from "vitest";
import { eventsForTransition } from "../../../operator/controller/events.js";
import type { ModelStatus } from "../../../operator/status.js";

const at = "2026-11-22T00:00:00Z";
function status(
  ready: string,
  degraded: string,
  degradedReason = "AsExpected",
  message = "",
): ModelStatus {
  return {
    conditions: [
      {
        type: "Ready",
        status: ready as "True",
        reason: "Available",
        message: "1 of 1 replicas ready",
        lastTransitionTime: at,
      },
      {
        type: "Progressing",
        status: "False",
        reason: "Available",
        message: "",
        lastTransitionTime: at,
      },
      {
        type: "Degraded",
        status: degraded as "True",
        reason: degradedReason as "AsExpected",
        message,
        lastTransitionTime: at,
      },
    ],
  };
}

describe("eventsForTransition", () => {
  it("announces readiness once", () => {
    expect(eventsForTransition(undefined, status("True", "False")).map((e) => e.reason)).toEqual([
      "Ready",
    ]);
    expect(eventsForTransition(status("True", "False"), status("True", "False"))).toEqual([]);
  });

  it("warns when the model stops being ready", () => {
    const events = eventsForTransition(status("True", "False"), status("False", "False"));
    expect(events).toEqual([expect.objectContaining({ type: "Warning", reason: "NotReady" })]);
  });

  it("warns on a new Degraded reason or message, not on a repeat", () => {
    const broken = status("False", "True", "FetchFailed", "pod p: model fetch failed: 404");
    expect(eventsForTransition(status("False", "False"), broken)).toEqual([
      expect.objectContaining({
        type: "Warning",
        reason: "FetchFailed",
        note: "pod p: model fetch failed: 404",
      }),
    ]);
    expect(eventsForTransition(broken, broken)).toEqual([]);
    const other = status("False", "True", "FetchFailed", "pod p: model fetch failed: 403");
    expect(eventsForTransition(broken, other)).toHaveLength(1);
  });
});
