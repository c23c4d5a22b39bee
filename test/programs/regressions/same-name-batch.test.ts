/**
 * Found by the interleavings property (scenario [["leak","leak"]]): two incarnations of one
 * StatefulSet pod (same name, different uid) deleted without CNI DEL end up in one batch — the
 * work queue keys by uid, so a quick scale down/up/down queues both. They share a podref, so both
 * planned the same pool entry; the batch patch then removed it twice, the API server rejected the
 * whole patch (422), every retry round did the same, and the address leaked with an error.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { deletePod, startPod } from "../../../src/testing/cni-plugin.ts"
import { memory } from "../../../src/testing/layers.ts"
import { freePods } from "../../support/free-pods.ts"
import { InMemoryCluster } from "../../../src/testing/InMemoryCluster.ts"
import { on } from "../../support/controller.ts"
import { cachesCaughtUp, createNad, eventsIn, podrefsOf, projectionOf, reservationNames } from "../../support/world.ts"

describe("regression: two incarnations of one pod in one batch", () => {
  it.live("are freed together with one patch, one Event per address", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.210.0.0/28" })
      const first = yield* startPod("default", "web-0", [on("net1")])
      const old = yield* projectionOf("default", "web-0")
      yield* deletePod(first)
      // Reborn: the idempotent ADD keeps the address (same podref + ifname), under a new container id.
      const second = yield* startPod("default", "web-0", [on("net1")])
      expect(second.ips[0]!.ips).toEqual(first.ips[0]!.ips)
      const reborn = yield* projectionOf("default", "web-0")
      yield* deletePod(second)
      yield* cachesCaughtUp
      expect(old.uid).not.toBe(reborn.uid)

      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      const results = yield* freePods([old, reborn])
      // Reported once (the loop counts ips_freed_total from these results), not once per incarnation.
      expect(results.map((r) => r.outcome)).toEqual([
        { _tag: "Freed", freed: [{ ip: "10.210.0.1", pool: "10.210.0.0-28", network: "net1" }], reservations: 1 },
        { _tag: "Freed", freed: [], reservations: 0 }
      ])
      expect(yield* podrefsOf("10.210.0.0-28")).toEqual([])
      expect(yield* reservationNames).toEqual([])
      expect(cluster.count({ verb: "patch", resource: "ippools" })).toBe(1)
      const events = yield* eventsIn("default")
      expect(events.map((e) => `${e.type} ${e.reason} ${e.message} x${e.count}`)).toEqual([
        "Normal IPAddressGarbageCollected successful cleanup of IP address [10.210.0.1] from network net1 x1"
      ])
    }).pipe(Effect.provide(memory())))
})
