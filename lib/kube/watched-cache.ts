import {
  makeInformer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type ObjectCache,
} from "@kubernetes/client-node";

/**
 * A list-and-watch cache of one resource type that never gives up. The
 * client library's informer stops on the first watch error (an API server
 * restart, a network blip, an expired resource version); this restarts it
 * with capped exponential backoff, so the cache converges again on its own,
 * the way client-go's reflector does.
 */
export interface WatchedCacheOptions<T extends KubernetesObject> {
  kc: KubeConfig;
  /** Watch path, e.g. /apis/apps/v1/deployments or /api/v1/namespaces/ns/pods. */
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  /** Called for every add, update and delete, with the object as last seen. */
  onChange: (obj: T, verb: "add" | "update" | "delete") => void;
  /** Called when the watch breaks; the cache restarts itself afterwards. */
  onError?: (err: unknown, retryInMs: number) => void;
  /** Backoff bounds for restarts; defaults 200 ms to 30 s. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

export interface WatchedCache<T extends KubernetesObject> extends ObjectCache<T> {
  /** Resolves after the first full list has been delivered. */
  synced: Promise<void>;
  stop(): Promise<void>;
}

export function startWatchedCache<T extends KubernetesObject>(
  options: WatchedCacheOptions<T>,
): WatchedCache<T> {
  const minBackoff = options.minBackoffMs ?? 200;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const informer = makeInformer<T>(options.kc, options.path, options.list, options.labelSelector);
  let stopped = false;
  let backoff = minBackoff;
  let retryTimer: NodeJS.Timeout | undefined;
  let generation = 0;
  let markSynced: () => void = () => undefined;
  const synced = new Promise<void>((resolve) => (markSynced = resolve));

  informer.on("add", (obj) => options.onChange(obj, "add"));
  informer.on("update", (obj) => options.onChange(obj, "update"));
  informer.on("delete", (obj) => options.onChange(obj, "delete"));
  informer.on("error", (err: unknown) => fail(err));

  // The library's start() resolves even when its list failed (it reports
  // that through the error callback instead), so a run counts as synced only
  // if no error arrived while it ran.
  function run(): void {
    if (stopped) return;
    const mine = ++generation;
    informer.start().then(
      () => {
        if (mine !== generation || stopped) return;
        backoff = minBackoff;
        markSynced();
      },
      (err: unknown) => fail(err),
    );
  }

  function fail(err: unknown): void {
    if (stopped || retryTimer !== undefined) return;
    generation++;
    const wait = backoff;
    backoff = Math.min(maxBackoff, backoff * 2);
    options.onError?.(err, wait);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      run();
    }, wait);
    retryTimer.unref();
  }

  run();

  return {
    synced,
    get: (name, namespace) => informer.get(name, namespace),
    list: (namespace) => informer.list(namespace),
    async stop() {
      stopped = true;
      if (retryTimer) clearTimeout(retryTimer);
      await informer.stop();
    },
  };
}
