/**
 * Found by the soak (bench/soak, seed 7, a compaction fault): kube-apiserver restarted after etcd
 * was compacted, and the controller's pod watch, waiting in its resume backoff, came back only a
 * few seconds later with 410 and relisted. A pod created and deleted (without CNI DEL) in between
 * was in no list and no watch event the informer saw: no deletion reached the release loop, and
 * the start-up sweep of the leadership re-acquired meanwhile had listed the pools before the pod
 * got its address. The address stayed held until the next scheduled sweep (by default the next
 * day at 04:30). A relist means events may have been missed: the controller now sweeps once the
 * pods are relisted after a gap.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { deletePod, startPod } from "../../../src/testing/cni-plugin.ts"
import { runController } from "../../../src/programs/run.ts"
import { memory } from "../../../src/testing/layers.ts"
import { InMemoryCluster } from "../../../src/testing/InMemoryCluster.ts"
import * as R from "../../../src/services/resources.ts"
import { metric, on, poolState } from "../../support/controller.ts"
import { eventually, require } from "../../support/eventually.ts"
import { createNad } from "../../support/world.ts"

const sweeps = metric("sweeps_total", { result: "success" })

describe("regression: a pod that lived only while the pod watch was down", () => {
  it.live("is freed once the informer relists, not at the next scheduled sweep", () =>
    Effect.gen(function* () {
      const cluster = yield* InMemoryCluster
      yield* createNad("default", "net1", { range: "10.215.0.0/28" })
      const keeper = yield* startPod("default", "keeper", [on("net1")])
      yield* Effect.forkScoped(runController)
      yield* eventually(Effect.flatMap(sweeps, (n) => require(() => (n ?? 0) >= 1, "no start-up sweep yet")))

      // The pod watch goes deaf (an API server going away), the pod lives and dies unseen, the history
      // is compacted, and the watch's resume answers 410: the informer relists.
      const watches = cluster.count({ verb: "watch", resource: "pods" })
      cluster.injectFault({ verb: "watch", resource: "pods", reason: "stall", times: 1 })
      cluster.closeWatches()

      yield* eventually(require(() => cluster.count({ verb: "watch", resource: "pods" }) > watches, "the pod watch did not resume"))
      const ghost = yield* startPod("default", "ghost", [on("net1")])
      yield* deletePod(ghost)
      cluster.compact()
      const lists = cluster.count({ verb: "list", resource: "pods" })
      cluster.closeWatches()
      yield* eventually(require(() => cluster.count({ verb: "list", resource: "pods" }) > lists, "the pods were not relisted"))

      yield* eventually(
        Effect.flatMap(poolState("10.215.0.0-28"), (pool) => require(() => pool.size === 1, `still held: ${JSON.stringify([...pool.keys()])}`)),
        "10 seconds"
      )
      const pool = yield* poolState("10.215.0.0-28")
      expect([...pool.values()].map((a) => a.podref)).toEqual([`default/${keeper.name}`])
      expect(cluster.snapshot(R.OverlappingRangeIPReservations, "kube-system").map((r) => r.metadata.name)).toEqual([keeper.ips[0]!.ips[0]!])
    }).pipe(
      Effect.scoped,
      Effect.provide(memory({ healthPort: 0, metricsPort: 0, leaderElect: false, identity: "relist-gap", reconcileSchedule: "0 0 29 2 *", namespace: "kube-system" }))
    ), 30_000)
})
