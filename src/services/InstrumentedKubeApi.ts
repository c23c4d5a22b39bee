/**
 * Counts every KubeApi request by verb, resource and HTTP code, and times every request but
 * watches, whichever KubeApi is underneath.
 */
import { Clock, Effect, Layer, Stream } from "effect"
import { KubeApi, type KubeApiShape } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import { Metrics, type MetricsShape } from "./Metrics.ts"

const code = (e: KubeError): string => (e.status === undefined ? e.reason : String(e.status))

export const wrap = (api: KubeApiShape, metrics: MetricsShape): KubeApiShape => {
  const count =
    (verb: string, ok: string) =>
    <A>(resource: string, effect: Effect.Effect<A, KubeError>): Effect.Effect<A, KubeError> =>
      Effect.flatMap(Clock.currentTimeMillis, (start) => {
        const seconds = Effect.map(Clock.currentTimeMillis, (now) => (now - start) / 1000)
        return effect.pipe(
          Effect.tapBoth({
            onSuccess: () => Effect.flatMap(seconds, (s) => metrics.apiRequest(verb, resource, ok, s)),
            onFailure: (e) => Effect.flatMap(seconds, (s) => metrics.apiRequest(verb, resource, code(e), s))
          })
        )
      })
  return {
    get: (r, ns, name, o) => count("get", "200")(r.plural, api.get(r, ns, name, o)),
    list: (r, ns, o) => count("list", "200")(r.plural, api.list(r, ns, o)),
    create: (r, ns, o) => count("create", "201")(r.plural, api.create(r, ns, o)),
    replace: (r, ns, o) => count("replace", "200")(r.plural, api.replace(r, ns, o)),
    patch: (r, ns, name, p, o) => count("patch", "200")(r.plural, api.patch(r, ns, name, p, o)),
    delete: (r, ns, name, o) => count("delete", "200")(r.plural, api.delete(r, ns, name, o)),
    watch: (r, ns, o) =>
      Stream.unwrap(
        metrics.apiRequest("watch", r.plural, "200").pipe(
          Effect.as(api.watch(r, ns, o).pipe(Stream.tapError((e) => metrics.apiRequest("watch", r.plural, code(e)))))
        )
      )
  }
}

/** `inner`, with every request counted in Metrics. */
export const instrument = <E, R>(inner: Layer.Layer<KubeApi, E, R>): Layer.Layer<KubeApi, E, R | Metrics> =>
  Layer.effect(KubeApi, Effect.zipWith(KubeApi, Metrics, wrap)).pipe(Layer.provide(inner))
