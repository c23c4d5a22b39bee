import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Stream } from "effect"
import { InMemoryCluster, layerMemory } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { podObject, poolObject } from "../support/objects.ts"
import { kubeApiContract } from "./contract/KubeApi.contract.ts"

kubeApiContract({ name: "in-memory", layer: layerMemory.pipe(Layer.provide(InMemoryCluster.layer())), namespace: "contract" })

const env = Layer.provideMerge(layerMemory, InMemoryCluster.layer({ historyLimit: 5 }))

describe("in-memory cluster specifics", () => {
  it.effect("a watch from a compacted version fails with Gone", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const cluster = yield* InMemoryCluster
      const start = yield* api.list(R.IPPools, "ns")
      for (let i = 0; i < 8; i++) yield* api.create(R.IPPools, "ns", poolObject("ns", `p${i}`, "10.0.0.0/24"))
      const out = yield* Effect.either(Stream.runDrain(api.watch(R.IPPools, "ns", { resourceVersion: start.resourceVersion })))
      expect(Either.isLeft(out) && out.left.reason).toBe("Gone")
      cluster.compact()
      const after = yield* Effect.either(Stream.runDrain(api.watch(R.IPPools, "ns", { resourceVersion: "3" })))
      expect(Either.isLeft(after) && after.left.reason).toBe("Gone")
    }).pipe(Effect.provide(env)))

  it.effect("injected faults fail the next matching calls, then clear", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const cluster = yield* InMemoryCluster
      cluster.injectFault({ verb: "get", resource: "pods", times: 2 })
      const a = yield* Effect.either(api.get(R.Pods, "ns", "x"))
      const b = yield* Effect.either(api.get(R.Pods, "ns", "x"))
      const c = yield* Effect.either(api.get(R.Pods, "ns", "x"))
      expect([a, b, c].map((e) => Either.isLeft(e) && e.left.reason)).toEqual(["Unavailable", "Unavailable", "NotFound"])
      expect(cluster.count({ verb: "get", resource: "pods" })).toBe(3)
    }).pipe(Effect.provide(env)))

  it.effect("a scheduled pod deleted with a grace period terminates first; grace 0 removes it", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const cluster = yield* InMemoryCluster
      yield* api.create(R.Pods, "ns", podObject("ns", "a", { nodeName: "n1" }))
      yield* api.delete(R.Pods, "ns", "a", { gracePeriodSeconds: 30 })
      const terminating = yield* api.get(R.Pods, "ns", "a")
      expect(terminating.metadata.deletionTimestamp).toBeTruthy()
      cluster.finishPodTermination("ns", "a", R.Pods)
      expect(Either.isLeft(yield* Effect.either(api.get(R.Pods, "ns", "a")))).toBe(true)
      yield* api.create(R.Pods, "ns", podObject("ns", "b", { nodeName: "n1" }))
      yield* api.delete(R.Pods, "ns", "b", { gracePeriodSeconds: 0 })
      expect(Either.isLeft(yield* Effect.either(api.get(R.Pods, "ns", "b")))).toBe(true)
    }).pipe(Effect.provide(env)))

  it.effect("invalid IPPool writes are rejected like the CRD schema would", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const bad = yield* Effect.either(api.create(R.IPPools, "ns", { metadata: { name: "x" }, spec: { allocations: {} } }))
      expect(Either.isLeft(bad) && bad.left.reason).toBe("Invalid")
    }).pipe(Effect.provide(env)))
})
