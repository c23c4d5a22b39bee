/**
 * Found by a 5-minute soak at 10 pods/s (seed 1, at 6af33c2): soak-a/p-1223 got 10.54.0.7 on the
 * flex network 0.9 s before it was force-deleted, 4 s after an API server restart, while the
 * leader's pool watch was still catching up; and its NAD had been deleted meanwhile (the pod's
 * start lagged behind the plan). The deletion freed the reservation (its cache had it) but not the
 * pool entry: the cached pool did not show it yet, and a network whose NAD is gone names no pools,
 * so it never counted as "unseen" and the pod was not looked at again (230c2a0's rule); the entry
 * stayed held past the soak's 60 s bound. The same gap for a NAD edited to another range: its new
 * pool, read live, holds nothing of the pod, which counted as seen. Now a network whose NAD is
 * missing is always looked at again, and a pool read live counts only if it shows the pod's entries.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { runDeletionLoop } from "../../../src/programs/deletion-loop.ts"
import { Caches } from "../../../src/services/Caches.ts"
import { KubeApi } from "../../../src/services/KubeApi.ts"
import * as R from "../../../src/services/resources.ts"
import { deletePod, startPod } from "../../../src/testing/cni-plugin.ts"
import { InMemoryCluster } from "../../../src/testing/InMemoryCluster.ts"
import { memory } from "../../../src/testing/layers.ts"
import { metric, on, poolState } from "../../support/controller.ts"
import { eventually, require } from "../../support/eventually.ts"
import { nadObject, whereaboutsConfig } from "../../support/objects.ts"
import { createNad } from "../../support/world.ts"

const batchesFreed = metric("free_batch_duration_seconds_count")
const POOL = "10.218.0.0-28"

/** A keeper pod, the deletion loop, then the pool watch deaf; `change` runs on the NAD once `late` got its address. */
const scenario = <E>(change: Effect.Effect<void, E, KubeApi | Caches>) =>
  Effect.gen(function* () {
    const cluster = yield* InMemoryCluster
    yield* createNad("default", "net1", { range: "10.218.0.0/28" })
    const keeper = yield* startPod("default", "keeper", [on("net1")])
    yield* Effect.forkScoped(runDeletionLoop({ lookAgainAfter: "1 second" }))
    yield* eventually(require(() => cluster.count({ verb: "watch", resource: "ippools" }) >= 1, "no pool watch yet"))

    // Only the pool watch goes deaf: the reservation, NAD and pod watches keep going.
    const watches = cluster.count({ verb: "watch", resource: "ippools" })
    cluster.injectFault({ verb: "watch", resource: "ippools", reason: "stall", times: 1 })
    cluster.closeWatches()
    yield* eventually(require(() => cluster.count({ verb: "watch", resource: "ippools" }) > watches, "the pool watch did not resume"))

    const late = yield* startPod("default", "late", [on("net1")])
    yield* change
    const before = (yield* batchesFreed) ?? 0
    yield* deletePod(late)
    yield* eventually(Effect.flatMap(batchesFreed, (n) => require(() => (n ?? 0) > before, "the deletion was not freed")))
    // The reservation went at once; the entry the cache did not show stays, for now.
    yield* eventually(require(() => cluster.snapshot(R.OverlappingRangeIPReservations, "kube-system").length === 1, "the reservation was not freed"))
    expect((yield* poolState(POOL)).size).toBe(2)
    cluster.closeWatches()

    yield* eventually(
      Effect.flatMap(poolState(POOL), (pool) => require(() => pool.size === 1, `still held: ${JSON.stringify([...pool.keys()])}`)),
      "10 seconds"
    )
    expect([...(yield* poolState(POOL)).values()].map((a) => a.podref)).toEqual([`default/${keeper.name}`])
  }).pipe(
    Effect.scoped,
    Effect.provide(memory({ healthPort: 0, metricsPort: 0, leaderElect: false, identity: "missing-nad-cache-lag", reconcileSchedule: "0 0 29 2 *", namespace: "kube-system" }))
  )

describe("regression: a deletion handled before the pool cache shows the pod's entry, its NAD changed meanwhile", () => {
  it.live("NAD deleted: the network names no pools, and the pod is looked at again", () =>
    scenario(
      Effect.gen(function* () {
        const api = yield* KubeApi
        const caches = yield* Caches
        yield* api.delete(R.NetworkAttachmentDefinitions, "default", "net1")
        yield* eventually(require(() => Option.isNone(caches.nads.get("default/net1")), "the NAD cache still has net1"))
      })
    ), 30_000)

  it.live("NAD edited to another range: its new pool, read live, holds nothing of the pod, and the pod is looked at again", () =>
    scenario(
      Effect.gen(function* () {
        const api = yield* KubeApi
        const caches = yield* Caches
        const nad = yield* api.get(R.NetworkAttachmentDefinitions, "default", "net1")
        const edited = nadObject("default", "net1", whereaboutsConfig({ range: "10.219.0.0/28" }, "net1"))
        yield* api.replace(R.NetworkAttachmentDefinitions, "default", { ...edited, metadata: { ...edited.metadata, resourceVersion: nad.metadata.resourceVersion } })
        yield* eventually(
          require(() => Option.exists(caches.nads.get("default/net1"), (n) => JSON.stringify(n).includes("10.219.0.0/28")), "the NAD cache still has the old range")
        )
      })
    ), 30_000)
})
