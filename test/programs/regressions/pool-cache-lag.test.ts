/**
 * Found by the 60-minute soak (seed 1, twice: at f7ab98e and at 23651d7): soak-a/p-5474 got its
 * address while every connection of the controller was being reset, and was deleted (no CNI DEL)
 * 4 s after the fault ended. The pod watch delivered the deletion before the pool watch had caught
 * up: the cached pool showed nothing of the pod, the deletion path took that for CNI DEL having
 * freed it (it reads live only pools the cache has never seen), and the entry and reservation
 * stayed held until a sweep 2 minutes later. A watch that resumes from its resourceVersion is no
 * relist, so no sweep followed it. Now a deleted pod attached to a whereabouts network where the
 * caches showed none of its entries is looked at once more, later.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { runDeletionLoop } from "../../../src/programs/deletion-loop.ts"
import * as R from "../../../src/services/resources.ts"
import { deletePod, startPod } from "../../../src/testing/cni-plugin.ts"
import { InMemoryCluster } from "../../../src/testing/InMemoryCluster.ts"
import { memory } from "../../../src/testing/layers.ts"
import { metric, on, poolState } from "../../support/controller.ts"
import { eventually, require } from "../../support/eventually.ts"
import { createNad } from "../../support/world.ts"

const batchesFreed = metric("free_batch_duration_seconds_count")

describe("regression: a deletion that arrives before the pool cache shows the pod's entry", () => {
  it.live("is freed by the later look, not left for the next sweep", () =>
    Effect.gen(function* () {
      const cluster = yield* InMemoryCluster
      yield* createNad("default", "net1", { range: "10.217.0.0/28" })
      const keeper = yield* startPod("default", "keeper", [on("net1")])
      yield* Effect.forkScoped(runDeletionLoop({ lookAgainAfter: "1 second" }))
      yield* eventually(require(() => cluster.count({ verb: "watch", resource: "ippools" }) >= 1, "no pool watch yet"))

      // The pool and reservation watches go deaf (connections reset); the pod watch keeps going.
      const watches = cluster.count({ verb: "watch", resource: "ippools" })
      for (const resource of ["ippools", "overlappingrangeipreservations"] as const) cluster.injectFault({ verb: "watch", resource, reason: "stall", times: 1 })
      cluster.closeWatches()
      yield* eventually(require(() => cluster.count({ verb: "watch", resource: "ippools" }) > watches, "the pool watch did not resume"))

      const late = yield* startPod("default", "late", [on("net1")])
      yield* deletePod(late)
      // The deletion is handled against the cache that lacks the entry; then the watches resume.
      yield* eventually(Effect.flatMap(batchesFreed, (n) => require(() => (n ?? 0) >= 1, "the deletion was not freed")))
      expect((yield* poolState("10.217.0.0-28")).size).toBe(2)
      cluster.closeWatches()

      yield* eventually(
        Effect.flatMap(poolState("10.217.0.0-28"), (pool) => require(() => pool.size === 1, `still held: ${JSON.stringify([...pool.keys()])}`)),
        "10 seconds"
      )
      expect([...(yield* poolState("10.217.0.0-28")).values()].map((a) => a.podref)).toEqual([`default/${keeper.name}`])
      expect(cluster.snapshot(R.OverlappingRangeIPReservations, "kube-system").map((r) => r.metadata.name)).toEqual([keeper.ips[0]!.ips[0]!])
    }).pipe(
      Effect.scoped,
      Effect.provide(memory({ healthPort: 0, metricsPort: 0, leaderElect: false, identity: "pool-cache-lag", reconcileSchedule: "0 0 29 2 *", namespace: "kube-system" }))
    ), 30_000)
})
