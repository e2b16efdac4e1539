import type { V1Service } from "@kubernetes/client-node";
import { childNames, HTTP_PORT, HTTP_PORT_NAME } from "../../crds/child-names.js";
import type { InferenceModel } from "../../crds/inference-model.js";
import { selectorLabels } from "./labels.js";
import { childMetadata } from "./owner.js";

/**
 * The ClusterIP Service the gateway calls: `http://<service>.<ns>.svc:8080`.
 * The target is the container port's name, so the runtime's port can move
 * without touching the Service.
 */
export function buildService(model: InferenceModel): V1Service {
  const names = childNames(model.metadata.name);
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: childMetadata(model, names.service),
    spec: {
      type: "ClusterIP",
      selector: selectorLabels(model),
      ports: [
        {
          name: HTTP_PORT_NAME,
          port: HTTP_PORT,
          targetPort: HTTP_PORT_NAME,
          protocol: "TCP",
          appProtocol: "http",
        },
      ],
    },
  };
}

/** The address the status publishes and the gateway dials. */
export function serviceEndpoint(model: Pick<InferenceModel, "metadata">): string | undefined {
  const { namespace } = model.metadata;
  if (namespace === undefined) return undefined;
  return `http://${childNames(model.metadata.name).service}.${namespace}.svc:${HTTP_PORT}`;
}
