// What the runtime's admission queue and steps did over a window, from its
// metrics endpoint (`modelgate_runtime_queue_wait_seconds`,
// `modelgate_runtime_batch_size`): whether a request waited for a step in
// the runtime longer beside a batch than alone, and how large the steps were.
// The waits are the interactive lane's (the histogram's `priority` label).

export interface RuntimeSteps {
  admitted: number;
  /** Admissions that waited over 1, 5 and 10 ms. */
  over: [number, number, number];
  steps: number;
  stepRequests: number;
}

const BOUNDS = ["0.001", "0.005", "0.01"] as const;

export async function readRuntimeSteps(runtimeUrl: string): Promise<RuntimeSteps> {
  const text = await (await fetch(`${runtimeUrl}/metrics`)).text();
  const value = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? Number.NaN);
  const admitted = value(
    /^modelgate_runtime_queue_wait_seconds_count\{[^}]*priority="interactive"[^}]*\} (\S+)$/m,
  );
  const within = BOUNDS.map((le) =>
    value(
      new RegExp(
        `^modelgate_runtime_queue_wait_seconds_bucket\\{(?=[^}]*le="${le}")(?=[^}]*priority="interactive")[^}]*\\} (\\S+)$`,
        "m",
      ),
    ),
  );
  return {
    admitted,
    over: within.map((n) => admitted - n) as [number, number, number],
    steps: value(/^modelgate_runtime_batch_size_count(?:\{[^}]*\})? (\S+)$/m),
    stepRequests: value(/^modelgate_runtime_batch_size_sum(?:\{[^}]*\})? (\S+)$/m),
  };
}

/** What happened between two readings. */
export function stepsBetween(before: RuntimeSteps, after: RuntimeSteps): RuntimeSteps {
  return {
    admitted: after.admitted - before.admitted,
    over: after.over.map((n, i) => n - before.over[i]!) as [number, number, number],
    steps: after.steps - before.steps,
    stepRequests: after.stepRequests - before.stepRequests,
  };
}

/** Per 1,000 interactive admissions, those that waited over 1 / 5 / 10 ms; then the mean step size. */
export function describeSteps(windows: readonly RuntimeSteps[]): string {
  const sum = windows.reduce(
    (total, w) => ({
      admitted: total.admitted + w.admitted,
      over: total.over.map((n, i) => n + w.over[i]!) as [number, number, number],
      steps: total.steps + w.steps,
      stepRequests: total.stepRequests + w.stepRequests,
    }),
    { admitted: 0, over: [0, 0, 0] as [number, number, number], steps: 0, stepRequests: 0 },
  );
  const perMille = sum.over.map((n) => ((n * 1000) / sum.admitted).toFixed(1)).join(" / ");
  return `${perMille} per 1,000 of ${sum.admitted} interactive admissions; mean step ${(sum.stepRequests / sum.steps).toFixed(2)} requests`;
}
