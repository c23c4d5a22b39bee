/**
 * Found by the interleavings property with the sweep (scenario [["del","stay","stay"],["stay","del"]]): the sweep
 * listed web-0's reservation while web-0's CNI DEL had freed the pool entry but not yet the
 * reservation ("NoAllocation" for a live pod). Before the sweep acted, the DEL finished and web-0
 * was re-created and re-ADDed onto the same address with a fresh reservation; the sweep deleted
 * that one on the strength of its stale listing. A reservation of a pod alive at the re-check is now
 * deleted only if the pod's status, read then, proves it lacks the address; and the sweep deletes
 * exactly the reservation it listed (resourceVersion precondition), never one re-created since.
 * Since rule 0 (claims.ts), a reservation whose address its live pod's status lists is not even
 * an orphan at the listing: it is reported as held, and the re-check never sees it.
 */
import { PluginStore } from "../../../src/testing/PluginStore.ts"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { type RunningPod, startPod } from "../../../src/testing/cni-plugin.ts"
import { releaseById } from "../../../src/testing/allocate.ts"
import { runSweep } from "../../../src/programs/sweep.ts"
import { InMemoryCluster } from "../../../src/testing/InMemoryCluster.ts"
import { KubeApi } from "../../../src/services/KubeApi.ts"
import { Reservations } from "../../../src/services/Reservations.ts"
import * as R from "../../../src/services/resources.ts"
import { on } from "../../support/controller.ts"
import { ApiHooks, type MemoryEnv, memoryWithHooks, once } from "../../support/hooks.ts"
import { createNad } from "../../support/world.ts"

describe("regression: the sweep and a reservation its listing calls stale", () => {
  it.live("is spared when the pod, re-created since, holds the address again", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<MemoryEnv>()
      yield* createNad("default", "net1", { range: "10.214.0.0/28" })
      const first = yield* startPod("default", "web-0", [on("net1")])
      // web-0's CNI DEL, half done: the pool entry is gone, the reservation not yet.
      const writer = yield* PluginStore
      yield* writer.updatePool("10.214.0.0-28", (a) => Either.right(releaseById(a, first.containerId, "net1").allocations))

      // Once the sweep has listed everything, the DEL finishes and web-0 comes back on the same address.
      let reborn: RunningPod | undefined
      hooks.after = once(
        (c) => c.verb === "list" && c.resource === "pods",
        () =>
          Effect.gen(function* () {
            yield* Effect.flatMap(Reservations, (r) => r.deleteFor("10.214.0.1", "default/web-0"))
            yield* Effect.flatMap(KubeApi, (k) => k.delete(R.Pods, "default", "web-0", { gracePeriodSeconds: 0 }))
            reborn = yield* startPod("default", "web-0", [on("net1")])
          }).pipe(Effect.provide(env), Effect.orDie)
      )
      const report = yield* runSweep({ dryRun: false })
      hooks.clear()

      expect(report.orphanReservations).toEqual([])
      expect(report.heldForAnother.map((h) => `${h.kind} ${h.name} ${h.claimants.join(",")}`)).toEqual(["reservation 10.214.0.1 default/web-0"])
      expect(report).toMatchObject({ reservationsDeleted: 0, freed: 0 })
      expect(reborn!.ips[0]!.ips).toEqual(["10.214.0.1"])
      const cluster = yield* InMemoryCluster
      expect(cluster.snapshot(R.OverlappingRangeIPReservations, "kube-system").map((r) => r["spec"])).toEqual([
        { podref: "default/web-0", ifname: "net1" }
      ])
    }).pipe(Effect.provide(memoryWithHooks())))

  it.live("is spared when the pod was gone at the re-check but came back and re-created it before the delete", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<MemoryEnv>()
      yield* createNad("default", "net1", { range: "10.216.0.0/28" })
      const first = yield* startPod("default", "web-0", [on("net1")])
      const writer = yield* PluginStore
      yield* writer.updatePool("10.216.0.0-28", (a) => Either.right(releaseById(a, first.containerId, "net1").allocations))
      // Listed with web-0 alive (NoAllocation); then its DEL finishes and the pod is deleted, so the
      // re-check finds it gone; just before the sweep's delete, web-0 is back with a new reservation.
      let reborn: RunningPod | undefined
      let delFinished = false
      hooks.after = once(
        (c) => c.verb === "list" && c.resource === "pods",
        () =>
          Effect.gen(function* () {
            yield* Effect.flatMap(Reservations, (r) => r.deleteFor("10.216.0.1", "default/web-0"))
            yield* Effect.flatMap(KubeApi, (k) => k.delete(R.Pods, "default", "web-0", { gracePeriodSeconds: 0 }))
            delFinished = true
          }).pipe(Effect.provide(env), Effect.orDie)
      )
      hooks.before = once(
        (c) => delFinished && c.verb === "delete" && c.resource === "overlappingrangeipreservations",
        () => startPod("default", "web-0", [on("net1")]).pipe(Effect.tap((p) => Effect.sync(() => void (reborn = p))), Effect.provide(env), Effect.orDie, Effect.asVoid)
      )
      const report = yield* runSweep({ dryRun: false })
      hooks.clear()
      expect(report.heldForAnother.map((h) => `${h.kind} ${h.name} ${h.claimants.join(",")}`)).toEqual(["reservation 10.216.0.1 default/web-0"])
      expect(report).toMatchObject({ reservationsDeleted: 0 })
      // Kept at the listing, the reservation was never up for deletion: the hook before one never fired.
      expect(reborn).toBeUndefined()
      const cluster = yield* InMemoryCluster
      expect(cluster.snapshot(R.OverlappingRangeIPReservations, "kube-system")).toEqual([])
    }).pipe(Effect.provide(memoryWithHooks())))

  it.live("is still deleted when the live pod's status shows another address", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.215.0.0/28" })
      yield* startPod("default", "web-0", [on("net1")])
      yield* Effect.flatMap(PluginStore, (w) => w.createReservation("10.215.0.9", { podref: "default/web-0" }))
      const report = yield* runSweep({ dryRun: false })
      expect(report.orphanReservations.map((o) => `${o.name} ${o.reason}`)).toEqual(["10.215.0.9 NoAllocation"])
      expect(report).toMatchObject({ reservationsDeleted: 1, spared: 0 })
    }).pipe(Effect.provide(memoryWithHooks())))
})
