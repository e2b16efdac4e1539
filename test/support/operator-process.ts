import { freePort } from "./free-port.js";
import { startServiceProcess, type ServiceProcess } from "./service-process.js";

/**
 * `modelgate operator` as a real child process, watching one test namespace
 * (its Lease lives there too) so tests sharing the cluster never see each
 * other's models.
 */
export interface OperatorProcess extends ServiceProcess {
  port: number;
  identity: string;
}

export interface OperatorProcessOptions {
  kubeconfigPath: string;
  namespace: string;
  identity: string;
  /** Extra flags, e.g. shorter lease timings. */
  args?: string[];
  image?: string;
  /** "tsx" runs the sources (no build needed); "dist" runs the built output, as the image does. */
  entry?: "tsx" | "dist";
  logLevel?: string;
}

export async function startOperatorProcess(
  options: OperatorProcessOptions,
): Promise<OperatorProcess> {
  const port = await freePort();
  const service = await startServiceProcess({
    args: [
      "operator",
      `--kubeconfig=${options.kubeconfigPath}`,
      `--watch-namespace=${options.namespace}`,
      `--lease-namespace=${options.namespace}`,
      `--runtime-image=${options.image ?? "modelgate:test"}`,
      "--host=127.0.0.1",
      `--port=${port}`,
      `--log-level=${options.logLevel ?? "debug"}`,
      ...(options.args ?? []),
    ],
    readyUrl: `http://127.0.0.1:${port}/readyz`,
    env: { POD_NAME: options.identity, MODELGATE_IDENTITY: options.identity },
    ...(options.entry ? { entry: options.entry } : {}),
  });
  return { ...service, port, identity: options.identity };
}
