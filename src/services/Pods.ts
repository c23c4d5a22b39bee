/** Live pod reads (never the cache): the same-name re-check before freeing, and the sweep's list. */
import { Context, Effect, Layer, Option } from "effect"
import { type PodProjection, projectPod } from "../domain/pod.ts"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, listProjected } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import * as R from "./resources.ts"

export interface PodsShape {
  /** The pod named so right now, if any. */
  readonly get: (namespace: string, name: string) => Effect.Effect<Option.Option<PodProjection>, KubeError>
  /** Every pod of a namespace (or of the cluster), paginated. */
  readonly list: (namespace?: string) => Effect.Effect<ReadonlyArray<PodProjection>, KubeError>
}

export class Pods extends Context.Tag("whereabouts-controller/Pods")<Pods, PodsShape>() {}

export const make = Effect.gen(function* () {
  const api = yield* KubeApi
  const { pageSize } = yield* ControllerConfig
  return {
    get: (namespace, name) =>
      api.get(R.Pods, namespace, name).pipe(
        Effect.map((o) => Option.some(projectPod(o))),
        Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed(Option.none<PodProjection>()))
      ),
    list: (namespace) =>
      listProjected(R.Pods, namespace, projectPod, { pageSize }).pipe(
        Effect.map(({ items }) => items),
        Effect.provideService(KubeApi, api)
      )
  } satisfies PodsShape
})

export const layer: Layer.Layer<Pods, never, KubeApi | ControllerConfig> = Layer.effect(Pods, make)
