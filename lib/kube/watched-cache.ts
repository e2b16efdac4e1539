import { rawList } from "./raw-list.js";
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
  /** The initial list; default: a plain-JSON list of `path` with the selectors. */
  list?: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  /**
   * Shrinks each object as it enters the cache (in place). Default: drops
   * metadata.managedFields and kubectl's last-applied annotation, which
   * nothing here reads and which are often the larger part of an object.
   */
  trim?: (obj: T) => void;
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
  const trim = options.trim ?? trimBookkeeping;
  const list =
    options.list ??
    (() =>
      rawList<T>(options.kc, options.path, {
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
      }));
  const trimmedList = async () => {
    const result = await list();
    result.items.forEach(trim);
    return result;
  };
  // The library's informer takes one selector argument; a field selector
  // rides in the watch path's query instead.
  const watchPath =
    options.fieldSelector === undefined
      ? options.path
      : `${options.path}?fieldSelector=${encodeURIComponent(options.fieldSelector)}`;
  const informer = makeInformer<T>(options.kc, watchPath, trimmedList, options.labelSelector);
  let stopped = false;
  let backoff = minBackoff;
  let retryTimer: NodeJS.Timeout | undefined;
  let generation = 0;
  let markSynced: () => void = () => undefined;
  const synced = new Promise<void>((resolve) => (markSynced = resolve));

  // The informer hands callbacks the very object it stored, so trimming
  // here shrinks the cached copy too.
  informer.on("add", (obj) => {
    trim(obj);
    options.onChange(obj, "add");
  });
  informer.on("update", (obj) => {
    trim(obj);
    options.onChange(obj, "update");
  });
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

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

export function trimBookkeeping(obj: KubernetesObject): void {
  const metadata = obj.metadata;
  if (!metadata) return;
  delete metadata.managedFields;
  if (metadata.annotations?.[LAST_APPLIED] !== undefined) delete metadata.annotations[LAST_APPLIED];
}
