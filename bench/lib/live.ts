/**
 * The benchmark's own access to a real API server (no client-side limit, not counted in any
 * contender's metrics), the apiserver's own request counters, and a per-second request sampler.
 */
import { Cause, Duration, Effect, Layer, type Scope } from "effect"
import { layerWith } from "../../src/services/ControllerConfig.ts"
import { KubeApi, type KubeApiShape } from "../../src/services/KubeApi.ts"
import { layerLive } from "../../src/services/KubeApiLive.ts"
import type { BenchPlane } from "./controlplane.ts"
import { parseProm, type Sample } from "./prom.ts"

/** KubeApi for the benchmark driver: admin kubeconfig, no rate limit. */
export const driverLayer = (plane: BenchPlane): Layer.Layer<KubeApi> =>
  layerLive.pipe(Layer.provide(layerWith({ kubeconfig: plane.kubeconfigPath, apiQps: 0, requestTimeout: Duration.seconds(120) })), Layer.orDie)

/** Runs a scenario scoped, over `driver`, as a promise; a failure rejects with its pretty cause. */
export const runOver =
  (driver: Layer.Layer<KubeApi>) =>
  <A>(effect: Effect.Effect<A, Error, KubeApi | Scope.Scope>): Promise<A> =>
    Effect.runPromise(
      Effect.scoped(effect).pipe(
        Effect.provide(driver),
        Effect.catchAllCause((cause) => Effect.die(new Error(Cause.pretty(cause))))
      )
    )

/** `apiserver_request_total` as the API server counts it. */
export const apiserverRequests = (plane: BenchPlane): Promise<ReadonlyArray<Sample>> =>
  plane.metrics().then((text) => parseProm(text, (n) => n === "apiserver_request_total"))

/** A KubeApi that counts its calls by verb, resource and outcome ("ok" or the failure's reason), for the allocator. */
export const countingApi = (api: KubeApiShape): { readonly counts: Map<string, number>; readonly api: KubeApiShape } => {
  const counts = new Map<string, number>()
  const bump = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1)
  const wrap = <A, E extends { readonly reason: string }>(verb: string, plural: string, e: Effect.Effect<A, E>) =>
    e.pipe(Effect.tapBoth({ onSuccess: () => Effect.sync(() => bump(`${verb} ${plural} ok`)), onFailure: (x) => Effect.sync(() => bump(`${verb} ${plural} ${x.reason}`)) }))
  return {
    counts,
    api: {
      get: (r, ns, n, o) => wrap("get", r.plural, api.get(r, ns, n, o)),
      list: (r, ns, o) => wrap("list", r.plural, api.list(r, ns, o)),
      create: (r, ns, o) => wrap("create", r.plural, api.create(r, ns, o)),
      replace: (r, ns, o) => wrap("replace", r.plural, api.replace(r, ns, o)),
      patch: (r, ns, n, p, o) => wrap("patch", r.plural, api.patch(r, ns, n, p, o)),
      delete: (r, ns, n, o) => wrap("delete", r.plural, api.delete(r, ns, n, o)),
      watch: api.watch
    }
  }
}

/**
 * The most requests any window between two samples held beyond `qps` × its length. A token bucket
 * that starts full admits at most burst + qps·T in any T seconds, so this is ≤ burst when the
 * limit held, whatever the windows' lengths (a fixed "10 s" window between samples that are not
 * exactly 10 s apart would need its own bound).
 */
export const excessOver = (points: ReadonlyArray<readonly [number, number]>, qps: number): number => {
  let worst = 0
  for (let i = 0; i < points.length; i++) {
    for (let j = i + 1; j < points.length; j++) worst = Math.max(worst, points[j]![1] - points[i]![1] - (qps * (points[j]![0] - points[i]![0])) / 1000)
  }
  return worst
}

/**
 * Samples a cumulative counter every `everyMs`; `stop` yields requests per second per interval,
 * `peak` the highest one-second rate seen, `max10s` the highest 10-second average.
 */
export const rateSampler = (read: () => Promise<number>, everyMs = 1000) => {
  const points: Array<{ t: number; v: number }> = []
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  const tick = async () => {
    if (stopped) return
    try {
      points.push({ t: performance.now(), v: await read() })
    } catch {
      // a missed sample only widens one interval
    }
    if (!stopped) timer = setTimeout(tick, everyMs - ((performance.now() - (points[0]?.t ?? 0)) % everyMs))
  }
  const started = tick()
  return {
    stop: async () => {
      await started
      stopped = true
      if (timer !== undefined) clearTimeout(timer)
      await tick().catch(() => undefined)
      const rates: Array<number> = []
      // Whole intervals only: the last one (cut short by stop) would scale a few requests up to a rate.
      for (let i = 1; i < points.length; i++) {
        const dt = points[i]!.t - points[i - 1]!.t
        if (dt >= everyMs * 0.9) rates.push(((points[i]!.v - points[i - 1]!.v) * 1000) / dt)
      }
      const windows: Array<number> = []
      for (let i = 10; i < points.length; i++) windows.push(((points[i]!.v - points[i - 10]!.v) * 1000) / Math.max(1, points[i]!.t - points[i - 10]!.t))
      return {
        perSecond: rates.map((r) => Math.round(r * 10) / 10),
        peak: rates.length === 0 ? 0 : Math.max(...rates),
        max10s: windows.length === 0 ? undefined : Math.max(...windows),
        total: (points[points.length - 1]?.v ?? 0) - (points[0]?.v ?? 0),
        // The samples themselves (ms since the first, cumulative count), for exact window bounds.
        points: points.map((p) => [Math.round((p.t - points[0]!.t) * 10) / 10, p.v] as const)
      }
    }
  }
}
