import { KubeConfig } from "@kubernetes/client-node";

/**
 * The API server's address and credentials, found the way kubectl and
 * controller-runtime find them: an explicit kubeconfig file, else
 * $KUBECONFIG, else the pod's service account (in-cluster).
 */
export function loadKubeConfig(kubeconfigPath?: string): KubeConfig {
  const kc = new KubeConfig();
  const path = kubeconfigPath ?? process.env.KUBECONFIG;
  if (path !== undefined && path !== "") {
    kc.loadFromFile(path);
  } else if (process.env.KUBERNETES_SERVICE_HOST !== undefined) {
    kc.loadFromCluster();
  } else {
    throw new Error(
      "no Kubernetes API server: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account",
    );
  }
  return kc;
}
