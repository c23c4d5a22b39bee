/**
 * Counts every KubeApi request by verb, resource and HTTP code, and times every request but
 * watches, whichever KubeApi is underneath.
 */
import { Clock, Effect, Layer, Stream } from "effect"
import { KubeApi, type KubeApiShape, around } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import { Metrics, type MetricsShape } from "./Metrics.ts"

const code = (e: KubeError): string => (e.status === undefined ? e.reason : String(e.status))

export const wrap = (api: KubeApiShape, metrics: MetricsShape): KubeApiShape =>
  around(
    api,
    ({ verb, resource }, effect) =>
      Effect.flatMap(Clock.currentTimeMillis, (start) => {
        const count = (code: string) => Effect.flatMap(Clock.currentTimeMillis, (now) => metrics.apiRequest(verb, resource.plural, code, (now - start) / 1000))
        return Effect.tapBoth(effect, { onSuccess: () => count(verb === "create" ? "201" : "200"), onFailure: (e) => count(code(e)) })
      }),
    (r, events) =>
      Stream.unwrap(metrics.apiRequest("watch", r.plural, "200").pipe(Effect.as(events.pipe(Stream.tapError((e) => metrics.apiRequest("watch", r.plural, code(e)))))))
  )

/** `inner`, with every request counted in Metrics. */
export const instrument = <E, R>(inner: Layer.Layer<KubeApi, E, R>): Layer.Layer<KubeApi, E, R | Metrics> =>
  Layer.effect(KubeApi, Effect.zipWith(KubeApi, Metrics, wrap)).pipe(Layer.provide(inner))
