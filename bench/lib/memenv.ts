/**
 * Contenders on the in-memory API server: the controller (the real `runController`, leader
 * election and HTTP endpoints off) or the baseline, each with its own rate-limited, counted
 * KubeApi over one shared MemoryClusterState; the benchmark drives the world through an
 * unlimited KubeApi of its own on the same state.
 */
import { Context, Deferred, Effect, Layer, Schedule, type Scope, Stream } from "effect"
import { runController } from "../../src/programs/run.ts"
import { withKubeApi } from "../../src/programs/layers.ts"
import { Caches } from "../../src/services/Caches.ts"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { MemoryClusterState, makeMemoryKubeApi, type MemoryClusterOptions } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi, type KubeApiShape } from "../../src/services/KubeApi.ts"
import { makeRateLimiter } from "../../src/services/KubeApiLive.ts"
import { Metrics, type MetricsShape } from "../../src/services/Metrics.ts"
import * as NadConfigs from "../../src/services/NadConfigs.ts"
import { type Baseline, baselineServices, startBaseline } from "../baseline.ts"
import { parseProm, type Sample } from "./prom.ts"

export type Kind = "ours" | "baseline"

export interface Limits {
  /** Requests per second; 0 = no client-side limit. */
  readonly qps: number
  readonly burst: number
}

/**
 * `api` behind client-go's token bucket, as KubeApiLive puts it (every request and watch start).
 * `admitted` counts what the bucket let through, when it did: the rate the limit is about (a
 * counter of completed requests also holds those admitted earlier and answered later).
 */
export const limitedApi = (api: KubeApiShape, limits: Limits, admitted: { count: number } = { count: 0 }): Effect.Effect<KubeApiShape, never, Scope.Scope> =>
  Effect.map(makeRateLimiter(limits.qps, limits.burst), (bucket) => {
    const limit = <A, E, R>(effect: Effect.Effect<A, E, R>) => bucket(Effect.zipRight(Effect.sync(() => void admitted.count++), effect))
    return {
    get: (r, ns, name, o) => limit(api.get(r, ns, name, o)),
    list: (r, ns, o) => limit(api.list(r, ns, o)),
    create: (r, ns, o) => limit(api.create(r, ns, o)),
    replace: (r, ns, o) => limit(api.replace(r, ns, o)),
    patch: (r, ns, name, p, o) => limit(api.patch(r, ns, name, p, o)),
    delete: (r, ns, name, o) => limit(api.delete(r, ns, name, o)),
    watch: (r, ns, o) => Stream.unwrap(limit(Effect.sync(() => api.watch(r, ns, o))))
    }
  })

export interface MemoryWorld {
  readonly state: MemoryClusterState
  /** Unlimited, uncounted: what the benchmark itself uses. */
  readonly driver: KubeApiShape
}

export const memoryWorld = (options: MemoryClusterOptions = {}): MemoryWorld => {
  const state = new MemoryClusterState(options)
  return { state, driver: makeMemoryKubeApi(state) }
}

export interface Handle {
  readonly kind: Kind
  readonly metrics: MetricsShape
  /** Parsed /metrics of the contender. */
  readonly scrape: Effect.Effect<ReadonlyArray<Sample>>
  /** Requests (and watch starts) its rate limiter has let through so far. */
  readonly admitted: () => number
}

/**
 * Starts a contender on the world for the current scope and returns once its caches are synced
 * (and, for the controller, its start-up sweep has run).
 */
export const startContender = (
  world: MemoryWorld,
  kind: Kind,
  limits: Limits,
  config: Partial<ControllerConfig.ControllerConfigShape> = {}
): Effect.Effect<Handle, never, Scope.Scope> =>
  Effect.gen(function* () {
    const admitted = { count: 0 }
    const kubeApi = Layer.scoped(KubeApi, limitedApi(makeMemoryKubeApi(world.state), limits, admitted))
    const configs = Layer.mergeAll(
      ControllerConfig.layerWith({ leaderElect: false, metricsPort: 0, healthPort: 0, apiQps: limits.qps, apiBurst: limits.burst, ...config }),
      NadConfigs.layerMemory()
    )
    const ready = yield* Deferred.make<void>()
    let metrics: MetricsShape
    if (kind === "ours") {
      const ctx = yield* Layer.build(withKubeApi(kubeApi).pipe(Layer.provideMerge(configs)))
      metrics = Context.get(ctx, Metrics)
      yield* Effect.forkScoped(Effect.provide(runController, ctx))
      const caches = Context.get(ctx, Caches)
      yield* caches.awaitSynced
      if (config.sweepOnStart !== false) {
        yield* Effect.repeat(metrics.value("sweeps_total", { result: "success" }), {
          until: (n) => (n ?? 0) >= 1,
          schedule: Schedule.spaced("5 millis")
        })
      }
      yield* Deferred.succeed(ready, undefined)
    } else {
      const ctx = yield* Layer.build(baselineServices(kubeApi).pipe(Layer.provideMerge(configs)))
      metrics = Context.get(ctx, Metrics)
      const started = yield* Deferred.make<Baseline>()
      yield* Effect.forkScoped(Effect.provide(Effect.flatMap(startBaseline, (b) => Effect.zipRight(Deferred.succeed(started, b), Effect.never)), ctx))
      yield* Deferred.await(started)
      yield* Deferred.succeed(ready, undefined)
    }
    yield* Deferred.await(ready)
    const m = metrics
    return { kind, metrics: m, scrape: Effect.map(m.render, (r) => parseProm(r.body)), admitted: () => admitted.count }
  })
