import { conditionSchema } from "./inference-model.js";

/**
 * The closed sets of condition types and reasons an InferenceModel's status
 * carries. Reasons are API surface: users filter on them (`kubectl wait`,
 * alerts) and the gateway reads Ready, so a reason is never renamed and a
 * retired one is never reused for another meaning.
 *
 * The types come from the CRD schema itself, so the two cannot drift.
 */
export const CONDITION_TYPES = conditionSchema.shape.type.options;
export type ConditionType = (typeof CONDITION_TYPES)[number];

export const CONDITION_STATUSES = conditionSchema.shape.status.options;
export type ConditionStatus = (typeof CONDITION_STATUSES)[number];

export const CONDITION_REASONS = [
  /** Ready True: at least one replica answers. Progressing False: the rollout is complete. */
  "Available",
  /** Progressing True: the Deployment is being created or its pods replaced; Ready False while none answers yet. */
  "RollingOut",
  /** Ready and Progressing False: no replica is asked for (spec.replicas is 0). */
  "ScaledToZero",
  /**
   * Degraded True: the spec cannot work (message names each field and why); nothing is applied.
   * Either it passes the schema but breaks a rule the schema cannot say, or it fails the schema
   * (stored before the CRD tightened a rule).
   */
  "InvalidSpec",
  /** Degraded True: the init container could not fetch the model (its error line is in the message). */
  "FetchFailed",
  /** Degraded True: the runtime container cannot start or keeps exiting (image pull, crash loop). */
  "RuntimeFailed",
  /** Degraded True: the Deployment stopped progressing (deadline exceeded, quota, admission). */
  "RolloutStalled",
  /** Degraded False. */
  "AsExpected",
] as const;
export type ConditionReason = (typeof CONDITION_REASONS)[number];

/** One condition as the status subresource stores it (the CRD's condition shape, with closed types). */
export interface Condition {
  type: ConditionType;
  status: ConditionStatus;
  reason: ConditionReason;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

/** The order conditions are written in, so that equal statuses serialize equally. */
export const CONDITION_ORDER: readonly ConditionType[] = ["Ready", "Progressing", "Degraded"];
