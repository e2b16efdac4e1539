import type {
  V1Container,
  V1Deployment,
  V1EnvVar,
  V1PodSpec,
  V1Probe,
  V1SecurityContext,
  V1VolumeMount,
} from "@kubernetes/client-node";
import { childNames, HTTP_PORT, HTTP_PORT_NAME } from "../../crds/child-names.js";
import type { InferenceModel } from "../../crds/inference-model.js";
import { standardLabels, selectorLabels } from "./labels.js";
import { childMetadata } from "./owner.js";
import { containerResources } from "./resources.js";
import { fetchArgs, MODELS_DIR, serveArgs } from "./runtime-args.js";
import { SPEC_HASH_ANNOTATION, specHash } from "./spec-hash.js";

/**
 * The Deployment of a model's runtime pods: an init container fetches the
 * weights into an emptyDir, the runtime serves them on 8080. Pure: the
 * object depends on the model and the operator's settings only.
 */
export interface BuildContext {
  /** The modelgate image; both containers run it. */
  image: string;
  imagePullPolicy: "Always" | "IfNotPresent" | "Never";
  /** The entrypoint; default `modelgate`. Arguments start at the subcommand. */
  command?: readonly string[];
  /** Extra variables for the fetch (HF_ENDPOINT, HF_TOKEN from a Secret, AWS_ENDPOINT_URL...). */
  fetchEnv?: readonly V1EnvVar[];
}

export const FETCH_CONTAINER = "fetch";
export const RUNTIME_CONTAINER = "runtime";
/** The nonroot user of distroless images; numeric so the kubelet can verify runAsNonRoot. */
export const RUNTIME_UID = 65532;

const MODELS_VOLUME = "models";
const TMP_VOLUME = "tmp";

export function buildDeployment(model: InferenceModel, ctx: BuildContext): V1Deployment {
  const { spec } = model;
  const names = childNames(model.metadata.name);
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: childMetadata(model, names.deployment),
    spec: {
      // Left out when an HPA owns scaling: a replicas field in our apply
      // would reset the autoscaler's choice on every reconcile.
      ...(spec.autoscaling ? {} : { replicas: spec.replicas }),
      selector: { matchLabels: selectorLabels(model) },
      // Surge, never take a serving pod away first: a replacement pod may
      // spend minutes fetching and loading before it can answer.
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: 0 } },
      // Fetching gigabytes and loading them on CPU takes longer than the
      // default 10 minutes; past this the rollout is reported as stalled.
      progressDeadlineSeconds: 1800,
      revisionHistoryLimit: 3,
      template: {
        metadata: {
          labels: standardLabels(model),
          annotations: { [SPEC_HASH_ANNOTATION]: specHash(model) },
        },
        spec: {
          // The runtime never calls the API server.
          automountServiceAccountToken: false,
          // Service links inject <SERVICE>_PORT variables; a Service named
          // `modelgate` would set MODELGATE_PORT=tcp://..., a runtime setting.
          enableServiceLinks: false,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: RUNTIME_UID,
            runAsGroup: RUNTIME_UID,
            fsGroup: RUNTIME_UID,
            seccompProfile: { type: "RuntimeDefault" },
          },
          ...scheduling(model),
          initContainers: [fetchContainer(model, ctx)],
          containers: [runtimeContainer(model, ctx)],
          volumes: [
            { name: MODELS_VOLUME, emptyDir: {} },
            { name: TMP_VOLUME, emptyDir: {} },
          ],
        },
      },
    },
  };
}

function scheduling(model: InferenceModel): Pick<V1PodSpec, "nodeSelector" | "tolerations"> {
  const { nodeSelector, tolerations } = model.spec.scheduling ?? {};
  return {
    ...(nodeSelector && Object.keys(nodeSelector).length > 0 ? { nodeSelector } : {}),
    ...(tolerations && tolerations.length > 0 ? { tolerations } : {}),
  };
}

function fetchContainer(model: InferenceModel, ctx: BuildContext): V1Container {
  return {
    name: FETCH_CONTAINER,
    image: ctx.image,
    imagePullPolicy: ctx.imagePullPolicy,
    command: [...(ctx.command ?? ["modelgate"])],
    args: fetchArgs(model),
    ...(ctx.fetchEnv && ctx.fetchEnv.length > 0 ? { env: [...ctx.fetchEnv] } : {}),
    // The same resources as the runtime: the pod's request is the larger of
    // the two anyway, and a namespace quota that demands limits accepts it.
    resources: containerResources(model.spec.resources),
    volumeMounts: mounts(false),
    securityContext: containerSecurity(),
    // fetch prints its one error line on stderr; this puts it in the pod
    // status, where the operator copies it into the FetchFailed condition.
    terminationMessagePolicy: "FallbackToLogsOnError",
  };
}

function runtimeContainer(model: InferenceModel, ctx: BuildContext): V1Container {
  return {
    name: RUNTIME_CONTAINER,
    image: ctx.image,
    imagePullPolicy: ctx.imagePullPolicy,
    command: [...(ctx.command ?? ["modelgate"])],
    args: serveArgs(model),
    ports: [{ name: HTTP_PORT_NAME, containerPort: HTTP_PORT, protocol: "TCP" }],
    resources: containerResources(model.spec.resources),
    volumeMounts: mounts(true),
    securityContext: containerSecurity(),
    terminationMessagePolicy: "FallbackToLogsOnError",
    ...probes(),
  };
}

/**
 * The runtime listens before it loads the model, so liveness answers during
 * the load and readiness only once a warm-up request has run. The startup
 * probe waits on readiness with a long budget: a load that takes minutes is
 * left alone, one that hangs is restarted after 15 minutes, and liveness
 * only starts once the model is up.
 */
function probes(): Pick<V1Container, "startupProbe" | "readinessProbe" | "livenessProbe"> {
  const get = (path: string): Pick<V1Probe, "httpGet"> => ({
    httpGet: { path, port: HTTP_PORT_NAME, scheme: "HTTP" },
  });
  return {
    startupProbe: {
      ...get("/v2/health/ready"),
      periodSeconds: 10,
      timeoutSeconds: 3,
      failureThreshold: 90,
    },
    readinessProbe: {
      ...get("/v2/health/ready"),
      periodSeconds: 5,
      timeoutSeconds: 3,
      failureThreshold: 3,
    },
    // A long batch keeps the event loop busy for a while: five seconds and
    // three misses before a restart, not one slow answer.
    livenessProbe: {
      ...get("/v2/health/live"),
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 3,
    },
  };
}

function mounts(readOnlyModels: boolean): V1VolumeMount[] {
  return [
    { name: MODELS_VOLUME, mountPath: MODELS_DIR, ...(readOnlyModels ? { readOnly: true } : {}) },
    { name: TMP_VOLUME, mountPath: "/tmp" },
  ];
}

function containerSecurity(): V1SecurityContext {
  return {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ["ALL"] },
  };
}
