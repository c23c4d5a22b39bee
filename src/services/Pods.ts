/** Live pod and node reads (never the cache): the re-check before freeing, and the sweep's lists. */
import { Context, Effect, Layer, Option } from "effect"
import type { NodeFact, NodeRecord } from "../domain/never-runs-again.ts"
import { toNodeRecord } from "./Caches.ts"
import { type PodProjection, projectPod } from "../domain/pod.ts"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type ReadOptions, ifExists, listItems } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import * as R from "./resources.ts"

/**
 * With `metadataOnly` or `namesOnly` a projection has no `phase` or `nodeName`: enough to learn
 * whether a pod of that name exists, not whether it holds an address.
 */
export interface PodsShape {
  /** The pod named so right now, if any. */
  readonly get: (namespace: string, name: string, options?: ReadOptions) => Effect.Effect<Option.Option<PodProjection>, KubeError>
  /** Every pod of a namespace (or of the cluster), paginated. */
  readonly list: (namespace?: string, options?: ReadOptions) => Effect.Effect<ReadonlyArray<PodProjection>, KubeError>
  /** The node named so right now, present or gone (the never-run-again rule judges a terminating pod by it). */
  readonly node: (name: string) => Effect.Effect<NodeFact, KubeError>
  /** Every node, paginated. */
  readonly nodes: Effect.Effect<ReadonlyArray<NodeRecord>, KubeError>
}

export class Pods extends Context.Tag("whereabouts-controller/Pods")<Pods, PodsShape>() {}

export const make = Effect.gen(function* () {
  const api = yield* KubeApi
  const { pageSize } = yield* ControllerConfig
  return {
    get: (namespace, name, options) => Effect.map(ifExists(api.get(R.Pods, namespace, name, options)), Option.map(projectPod)),
    list: (namespace, options) => listItems(api, R.Pods, namespace, projectPod, { ...options, pageSize }),
    node: (name) =>
      api.get(R.Nodes, undefined, name).pipe(
        Effect.map((o): NodeFact => ({ _tag: "Present", node: toNodeRecord(o) })),
        Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed<NodeFact>({ _tag: "Gone" }))
      ),
    nodes: listItems(api, R.Nodes, undefined, toNodeRecord, { pageSize })
  } satisfies PodsShape
})

export const layer: Layer.Layer<Pods, never, KubeApi | ControllerConfig> = Layer.effect(Pods, make)
