import type { V2HorizontalPodAutoscaler } from "@kubernetes/client-node";
import { childNames } from "../../crds/child-names.js";
import type { InferenceModel } from "../../crds/inference-model.js";
import { childMetadata } from "./owner.js";

/**
 * The HorizontalPodAutoscaler (autoscaling/v2) of a model with
 * spec.autoscaling; null without it, and the apply layer then deletes an HPA
 * it owns. CPU utilization is measured against the container's CPU request
 * (or its limit, which Kubernetes copies into an unset request); with
 * neither, the HPA reports FailedGetResourceMetric and keeps the current size.
 */
export function buildHpa(model: InferenceModel): V2HorizontalPodAutoscaler | null {
  const { autoscaling } = model.spec;
  if (!autoscaling) return null;
  const names = childNames(model.metadata.name);
  return {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata: childMetadata(model, names.hpa),
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: names.deployment },
      minReplicas: autoscaling.minReplicas,
      maxReplicas: autoscaling.maxReplicas,
      metrics: [
        {
          type: "Resource",
          resource: {
            name: "cpu",
            target: {
              type: "Utilization",
              averageUtilization: autoscaling.targetCPUUtilizationPercentage,
            },
          },
        },
      ],
    },
  };
}
