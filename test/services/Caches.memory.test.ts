import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Queue, Stream } from "effect"
import type { PodProjection } from "../../src/domain/pod.ts"
import { Caches, NODE_INDEX, layer as cachesLayer } from "../../src/services/Caches.ts"
import { layerWith } from "../../src/services/ControllerConfig.ts"
import { InMemoryCluster, layerMemory } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { eventually, require } from "../support/eventually.ts"
import { podObject } from "../support/objects.ts"
import { cachesContract } from "./contract/Caches.contract.ts"

cachesContract({ name: "in-memory", layer: layerMemory.pipe(Layer.provide(InMemoryCluster.layer())), namespace: "contract" })

const world = Layer.mergeAll(Layer.provideMerge(layerMemory, InMemoryCluster.layer({ historyLimit: 50 })), layerWith({ namespace: "kube-system" }))

const start = Effect.gen(function* () {
  const caches = Context.get(yield* Layer.build(cachesLayer), Caches)
  const deleted = yield* Queue.unbounded<PodProjection>()
  yield* Effect.forkScoped(Stream.runForEach(Stream.fromQueue(yield* caches.pods.subscribe), (e) => (e.type === "delete" ? Queue.offer(deleted, e.object) : Effect.void)))
  yield* caches.awaitSynced
  return { caches, deleted }
})

describe("Caches on the in-memory cluster", () => {
  it.scopedLive("a pool update keeps the cached version's objects for the entries it did not change", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const allocations = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [String(i + 1), { id: `c${i}`, podref: `ns/p${i}`, ifname: "net1" }]))
      yield* api.create(R.IPPools, "kube-system", { metadata: { name: "10.0.0.0-24" }, spec: { range: "10.0.0.0/24", allocations } })
      const { caches } = yield* start
      const before = Option.getOrThrow(caches.pools.get("10.0.0.0-24"))
      yield* api.patch(R.IPPools, "kube-system", "10.0.0.0-24", { type: "json", ops: [{ op: "remove", path: "/spec/allocations/7" }] })
      const after = yield* eventually(
        Effect.flatMap(Effect.sync(() => Option.getOrThrow(caches.pools.get("10.0.0.0-24"))), (p) =>
          p.resourceVersion === before.resourceVersion ? Effect.fail("update not seen yet") : Effect.succeed(p)
        )
      )
      expect(after.pool.entries).toHaveLength(49)
      expect(after.pool.entries.filter((e) => before.pool.entries.includes(e))).toHaveLength(49)
      expect(caches.pools.byIndex("podref", "ns/p6")).toEqual([])
      expect(caches.pools.byIndex("podref", "ns/p7")).toEqual([after])
    }).pipe(Effect.provide(world)))

  it.scopedLive("an index keeps every key of a value as it grows past a small array and shrinks back: a node's pods", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      // Pods on a node are deleted gracefully unless told otherwise; these have no kubelet.
      const now = { gracePeriodSeconds: 0 }
      const names = Array.from({ length: 40 }, (_, i) => `p${i}`)
      for (const n of names) yield* api.create(R.Pods, "ns", podObject("ns", n, { nodeName: n === "p3" ? "n2" : "n1" }))
      const { caches } = yield* start
      const onNode = (node: string) => caches.pods.byIndex(NODE_INDEX, node).map((p) => p.name).sort()
      const n1 = names.filter((n) => n !== "p3")
      expect(onNode("n1")).toEqual([...n1].sort())
      expect(onNode("n2")).toEqual(["p3"])
      // Moved between nodes by a recreation, and most of n1's deleted.
      yield* api.delete(R.Pods, "ns", "p3", now)
      yield* api.create(R.Pods, "ns", podObject("ns", "p3", { nodeName: "n1" }))
      for (const n of n1.slice(0, 30)) yield* api.delete(R.Pods, "ns", n, now)
      const left = [...n1.slice(30), "p3"].sort()
      yield* eventually(require(() => caches.pods.byKey.size === left.length && JSON.stringify(onNode("n1")) === JSON.stringify(left), "deletions not seen"))
      expect(onNode("n2")).toEqual([])
      for (const n of left) yield* api.delete(R.Pods, "ns", n, now)
      yield* eventually(require(() => caches.pods.byKey.size === 0, "deletions not seen"))
      expect(onNode("n1")).toEqual([])
    }).pipe(Effect.provide(world)))

  it.scopedLive("a relist after 410 reports the pods deleted while the watch was down", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const cluster = yield* InMemoryCluster
      for (const n of ["a", "b", "c"]) yield* api.create(R.Pods, "ns", podObject("ns", n))
      const { caches, deleted } = yield* start
      expect(caches.pods.byKey.size).toBe(3)
      // Stop watches from resuming: every resume answers 410 once history is compacted.
      cluster.injectFault({ verb: "watch", resource: "pods", reason: "stall", times: 1 })
      cluster.closeWatches()
      yield* api.delete(R.Pods, "ns", "b")
      yield* api.create(R.Pods, "ns", podObject("ns", "d"))
      cluster.compact()
      cluster.closeWatches()
      yield* eventually(require(() => caches.pods.byKey.size === 3 && Option.isSome(caches.pods.get("ns/d")), "relist not applied"))
      const gone = yield* Queue.take(deleted).pipe(Effect.timeout("5 seconds"))
      expect(gone.name).toBe("b")
      expect(caches.pods.restarts()).toBe(0)
    }).pipe(Effect.provide(world)))

  it.scopedLive("a pod re-created under the same name while unwatched yields a deletion of the old uid", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const cluster = yield* InMemoryCluster
      const old = yield* api.create(R.Pods, "ns", podObject("ns", "sts-0"))
      const { caches, deleted } = yield* start
      cluster.injectFault({ verb: "watch", resource: "pods", reason: "stall", times: 1 })
      cluster.closeWatches()
      yield* api.delete(R.Pods, "ns", "sts-0")
      const reborn = yield* api.create(R.Pods, "ns", podObject("ns", "sts-0"))
      cluster.compact()
      cluster.closeWatches()
      const gone = yield* Queue.take(deleted).pipe(Effect.timeout("5 seconds"))
      expect(gone.uid).toBe(old.metadata.uid)
      yield* eventually(require(() => Option.getOrThrow(caches.pods.get("ns/sts-0")).uid === reborn.metadata.uid, "reborn pod not cached"))
    }).pipe(Effect.provide(world)))

  it.scopedLive("after a watch error the informer restarts with backoff and catches up", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const cluster = yield* InMemoryCluster
      const { caches } = yield* start
      cluster.injectFault({ verb: "watch", resource: "pods", reason: "Forbidden", times: 1 })
      cluster.closeWatches()
      yield* api.create(R.Pods, "ns", podObject("ns", "late"))
      yield* eventually(require(() => Option.isSome(caches.pods.get("ns/late")), "not caught up"), "10 seconds")
      expect(caches.pods.restarts()).toBe(1)
    }).pipe(Effect.provide(world)))

  it.scopedLive("a watch refused for a while (API server restarting) resumes without a relist", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const cluster = yield* InMemoryCluster
      const { caches } = yield* start
      const lists = cluster.count({ verb: "list", resource: "pods" })
      cluster.injectFault({ verb: "watch", resource: "pods", reason: "Unavailable", times: 2 })
      cluster.closeWatches()
      yield* api.create(R.Pods, "ns", podObject("ns", "after-restart"))
      yield* eventually(require(() => Option.isSome(caches.pods.get("ns/after-restart")), "not caught up"))
      expect(cluster.count({ verb: "list", resource: "pods" })).toBe(lists)
      expect(caches.pods.restarts()).toBe(0)
    }).pipe(Effect.provide(world)))
})
