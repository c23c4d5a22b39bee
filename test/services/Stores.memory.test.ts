import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { layerWith } from "../../src/services/ControllerConfig.ts"
import { IPPoolStore, layer as poolsLayer } from "../../src/services/IPPoolStore.ts"
import { PluginStore, layer as pluginLayer } from "../../src/testing/PluginStore.ts"
import * as R from "../../src/services/resources.ts"
import { InMemoryCluster, layerMemory } from "../../src/testing/InMemoryCluster.ts"
import { storesContract } from "./contract/Stores.contract.ts"

storesContract({ name: "in-memory", layer: layerMemory.pipe(Layer.provide(InMemoryCluster.layer())), namespace: "contract" })

describe("the simulation's pool update on the in-memory cluster", () => {
  it.effect("a write between our read and our patch fails the resourceVersion test as a Conflict", () =>
    Effect.gen(function* () {
      const cluster = yield* InMemoryCluster
      const store = yield* IPPoolStore
      const writer = yield* PluginStore
      yield* writer.createPool("10.8.0.0-24", "10.8.0.0/24")
      const conflict = yield* Effect.either(
        writer.updatePool("10.8.0.0-24", (a) => {
          cluster.patch(R.IPPools, "kube-system", "10.8.0.0-24", { type: "merge", body: { metadata: { labels: { x: "y" } } } })
          return Either.right({ ...a, "9": { id: "x", podref: "ns/x" } })
        })
      )
      expect(Either.isLeft(conflict) && conflict.left.reason).toBe("Conflict")
      expect((yield* store.get("10.8.0.0-24")).pool.entries).toHaveLength(0)
    }).pipe(Effect.provide(Layer.provideMerge(Layer.merge(poolsLayer, pluginLayer), Layer.merge(Layer.provideMerge(layerMemory, InMemoryCluster.layer()), layerWith())))))
})
