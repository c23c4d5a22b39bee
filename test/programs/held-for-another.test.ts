/**
 * Rule 0 in the deletion loop, in memory: a deleted pod's address another running pod lists is
 * kept, and looked at again when that pod comes through the loop. Found with upstream's e2e suite
 * on real controllers (test/live/claimant-gone.test.ts): it deletes a NAD, then the two pods on
 * one address; the first pod's entry was kept for the second and then never looked at again.
 * And a pod that will never run again claims nothing (found by the soak, seed 7): a pod stranded
 * on a deleted node is freed while its object remains; the plugin hands its address to a new pod;
 * that pod's deletion must free it, not keep it for the stranded pod's stale network-status.
 * And a listing on record as the lister's own keeps no one else's entry (found by the hour soak):
 * a dead pod's reservation deleted, its pool patch refused (429), the plugin hands the address out
 * again through another pool of the same network; the dead pod's entry must still be freed.
 * And what a sweep keeps for another pod is looked at again when that pod goes (found by the hour
 * soak): a start-up sweep kept a dead pod's entry for a terminating pod whose status still listed
 * the address; that pod was gone six seconds later, but nothing looked again before the next sweep.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import type { HeldForAnother } from "../../src/domain/claims.ts"
import type { RunningLoop } from "../../src/programs/deletion-loop.ts"
import { runSweep } from "../../src/programs/sweep.ts"
import type { ControllerConfig } from "../../src/services/ControllerConfig.ts"
import type { IPPoolStore } from "../../src/services/IPPoolStore.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import type { PluginStore } from "../../src/testing/PluginStore.ts"
import * as R from "../../src/services/resources.ts"
import { startPod } from "../../src/testing/cni-plugin.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { memory } from "../../src/testing/layers.ts"
import { metric, on, startDeletionLoop } from "../support/controller.ts"
import { eventually, require } from "../support/eventually.ts"
import { nodeObject } from "../support/objects.ts"
import { ApiHooks, memoryWithHooks, once } from "../support/hooks.ts"
import { cachesCaughtUp, createNad, podrefsOf, reservationNames } from "../support/world.ts"

const NS = "default"
const WIDE = "10.131.0.0-16"

const api = <A, E>(f: (k: typeof KubeApi.Service) => Effect.Effect<A, E>) => Effect.flatMap(KubeApi, f)

/** Terminating from now on, its node never confirming (a finalizer holds the object), then its node deleted. */
const strandedOnDeletedNode = (name: string, node: string) =>
  Effect.gen(function* () {
    yield* api((k) => k.patch(R.Pods, NS, name, { type: "merge", body: { metadata: { finalizers: ["test.example/held"] } } }))
    yield* api((k) => k.delete(R.Pods, NS, name, { gracePeriodSeconds: 0 }))
    yield* api((k) => k.delete(R.Nodes, undefined, node))
  })

const deleted = (name: string) => Effect.flatMap(KubeApi, (k) => k.delete(R.Pods, NS, name, { gracePeriodSeconds: 0 }))

describe("rule 0 in the deletion loop", () => {
  it.live("a deleted pod's address another pod lists is kept while that pod runs, and freed once it is deleted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // Overlapping ranges off on the narrower network: it hands out the wider one's first address again.
        yield* createNad(NS, "wide", { range: "10.131.0.0/16" })
        yield* createNad(NS, "narrow", { range: "10.131.0.0/17", enable_overlapping_ranges: false })
        yield* startDeletionLoop()
        const first = yield* startPod(NS, "first", [on("wide")])
        const second = yield* startPod(NS, "second", [on("narrow")])
        expect([first.ips[0]!.ips, second.ips[0]!.ips]).toEqual([["10.131.0.1"], ["10.131.0.1"]])
        // The second pod's network can no longer be read: its listing counts in every domain.
        yield* Effect.flatMap(KubeApi, (k) => k.delete(R.NetworkAttachmentDefinitions, NS, "narrow"))
        yield* cachesCaughtUp

        const batches = () => Effect.map(metric("free_batch_duration_seconds_count"), (n) => n ?? 0)
        const before = yield* batches()
        yield* deleted("first")
        yield* eventually(Effect.flatMap(batches(), (n) => require(() => n > before, "first's deletion handled")), "10 seconds")
        expect(yield* podrefsOf(WIDE)).toEqual([`${NS}/first`])

        yield* deleted("second")
        yield* eventually(Effect.flatMap(podrefsOf(WIDE), (refs) => require(() => refs.length === 0, `first's entry freed once second is gone: ${refs.join(",")}`)), "10 seconds")
      })
    ).pipe(Effect.provide(memory({ namespace: "kube-system", retryBaseDelay: Duration.millis(5) }))))
})

describe("rule 0: a pod that will never run again claims nothing", () => {
  const POOL = "10.133.0.0-24"

  it.live("the deletion loop frees an address a stranded pod's stale status still lists, once the plugin handed it to a pod now deleted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* createNad(NS, "net1", { range: "10.133.0.0/24" })
        for (const n of ["node-1", "node-2"]) yield* api((k) => k.create(R.Nodes, undefined, nodeObject(n)))
        yield* startDeletionLoop()
        const stranded = yield* startPod(NS, "stranded", [on("net1")], "node-2")
        yield* strandedOnDeletedNode("stranded", "node-2")
        yield* eventually(Effect.flatMap(podrefsOf(POOL), (refs) => require(() => refs.length === 0, `stranded freed: ${refs.join(",")}`)), "10 seconds")

        const next = yield* startPod(NS, "next", [on("net1")], "node-1")
        expect(next.ips[0]!.ips).toEqual(stranded.ips[0]!.ips)
        yield* cachesCaughtUp
        yield* deleted("next")
        yield* eventually(Effect.flatMap(podrefsOf(POOL), (refs) => require(() => refs.length === 0, `next freed, not kept for stranded: ${refs.join(",")}`)), "10 seconds")
        expect(yield* reservationNames).toEqual([])
      })
    ).pipe(Effect.provide(memory({ namespace: "kube-system", retryBaseDelay: Duration.millis(5), terminatingGrace: Duration.zero }))))

  it.live("the sweep frees an orphan whose address only a stranded pod's stale status lists, and keeps it while that pod's node is there", () =>
    Effect.gen(function* () {
      yield* createNad(NS, "net1", { range: "10.133.0.0/24" })
      for (const n of ["node-1", "node-2"]) yield* api((k) => k.create(R.Nodes, undefined, nodeObject(n)))
      yield* startPod(NS, "stranded", [on("net1")], "node-2")
      // The entry rewritten to a pod that is gone (the stranded pod's own entry, as a restore would leave it).
      yield* api((k) => k.patch(R.IPPools, "kube-system", POOL, { type: "merge", body: { spec: { allocations: { "1": { id: "c9", podref: `${NS}/gone` } } } } }))
      yield* api((k) => k.patch(R.Pods, NS, "stranded", { type: "merge", body: { metadata: { finalizers: ["test.example/held"] } } }))
      yield* api((k) => k.delete(R.Pods, NS, "stranded", { gracePeriodSeconds: 0 }))

      const kept = yield* runSweep({ dryRun: false })
      expect(kept.freed).toBe(0)
      expect(kept.heldForAnother.map((h) => [h.kind, h.podref, h.claimants])).toContainEqual(["allocation", `${NS}/gone`, [`${NS}/stranded`]])

      yield* api((k) => k.delete(R.Nodes, undefined, "node-2"))
      const swept = yield* runSweep({ dryRun: false })
      expect(swept.heldForAnother).toEqual([])
      expect(yield* podrefsOf(POOL)).toEqual([])
    }).pipe(Effect.provide(memory({ namespace: "kube-system", terminatingGrace: Duration.zero }))))
})

describe("rule 0: a listing on record as the lister's own keeps no one else's entry", () => {
  it.live("a dead pod's entry is freed after a refused pool patch let the plugin hand its address out through another pool of the network", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // One unnamed network, overlapping ranges on in both: one reservation per address across both pools.
        yield* createNad(NS, "narrow", { range: "10.134.0.0/17" })
        yield* createNad(NS, "wide", { range: "10.134.0.0/16" })
        yield* startDeletionLoop()
        const first = yield* startPod(NS, "first", [on("narrow")])
        expect(first.ips[0]!.ips).toEqual(["10.134.0.1"])
        yield* cachesCaughtUp

        // Right before the controller's pool patch (its reservation already deleted, rule 4), the plugin
        // hands the address out again from the wider pool; then that patch is refused with 429.
        const hooks = yield* ApiHooks
        const cluster = yield* InMemoryCluster
        const env = yield* Effect.context<KubeApi | IPPoolStore | PluginStore>()
        let second: ReadonlyArray<string> = []
        hooks.before = once(
          (c) => c.verb === "patch" && c.resource === "ippools",
          () =>
            Effect.gen(function* () {
              hooks.clear()
              second = (yield* startPod(NS, "second", [on("wide")])).ips[0]!.ips
              cluster.injectFault({ verb: "patch", resource: "ippools", reason: "TooManyRequests" })
            }).pipe(Effect.orDie, Effect.provide(env))
        )
        yield* deleted("first")

        yield* eventually(Effect.flatMap(podrefsOf("10.134.0.0-17"), (refs) => require(() => refs.length === 0, `first's entry freed on the retry: ${refs.join(",")}`)), "10 seconds")
        expect(second).toEqual(["10.134.0.1"])
        expect(yield* podrefsOf("10.134.0.0-16")).toEqual([`${NS}/second`])
        expect(yield* reservationNames).toEqual(["10.134.0.1"])
        const reservation = yield* api((k) => k.get(R.OverlappingRangeIPReservations, "kube-system", "10.134.0.1"))
        expect((reservation["spec"] as { podref: string }).podref).toBe(`${NS}/second`)
      })
    ).pipe(Effect.provide(memoryWithHooks({ namespace: "kube-system", retryBaseDelay: Duration.millis(5) }))))
})

describe("rule 0: what a sweep kept for another pod is freed once that pod goes, without another sweep", () => {
  const POOL = "10.135.0.0-24"
  // The entry names a pod that is gone while holder still lists the address (a restore, or a CNI DEL and a re-ADD raced).
  const entryNamedGoneWhileHolderLists = Effect.gen(function* () {
    yield* createNad(NS, "net1", { range: "10.135.0.0/24" })
    yield* startPod(NS, "holder", [on("net1")])
    yield* api((k) => k.patch(R.IPPools, "kube-system", POOL, { type: "merge", body: { spec: { allocations: { "1": { id: "c9", podref: `${NS}/gone` } } } } }))
    yield* cachesCaughtUp
  })

  it.live("the deletion loop looks again at the sweep's held-for-another entry when the pod it was kept for is deleted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* entryNamedGoneWhileHolderLists
        let held: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = []
        yield* startDeletionLoop((loop) =>
          Effect.map(runSweep({ dryRun: false, leave: loop.podrefsHeld, keptFor: loop.keptFor }), (r) => void (held = r.heldForAnother.map((h) => [h.podref, h.claimants] as const)))
        )
        expect(held).toContainEqual([`${NS}/gone`, [`${NS}/holder`]])
        expect(yield* podrefsOf(POOL)).toEqual([`${NS}/gone`])

        yield* deleted("holder")
        yield* eventually(Effect.flatMap(podrefsOf(POOL), (refs) => require(() => refs.length === 0, `the entry kept for holder freed once holder is gone: ${refs.join(",")}`)), "10 seconds")
        expect(yield* reservationNames).toEqual([])
        // The sweep found gone's entry: freed by the loop, counted as the sweep's (holder had no entry of its own).
        expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(1)
        expect(yield* metric("ips_freed_total", { trigger: "deletion" }) ?? 0).toBe(0)
      })
    ).pipe(Effect.provide(memory({ namespace: "kube-system", retryBaseDelay: Duration.millis(5) }))))

  it.live("a pod kept for that went through the loop before the sweep handed its keep over: looked at again at once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* entryNamedGoneWhileHolderLists
        // Between the sweep's listing and its hand-over, holder is deleted and the loop frees what it held (its reservation).
        const holderGone = Effect.zipRight(
          deleted("holder"),
          eventually(Effect.flatMap(reservationNames, (names) => require(() => names.length === 0, `holder's reservation freed: ${names.join(",")}`)), "10 seconds")
        )
        const env = yield* Effect.context<KubeApi | ControllerConfig>()
        const handOver = (loop: RunningLoop) => (held: ReadonlyArray<HeldForAnother>) => Effect.zipRight(Effect.orDie(Effect.provide(holderGone, env)), loop.keptFor(held))
        yield* startDeletionLoop((loop) => runSweep({ dryRun: false, leave: loop.podrefsHeld, keptFor: handOver(loop) }))
        yield* eventually(Effect.flatMap(podrefsOf(POOL), (refs) => require(() => refs.length === 0, `the entry kept for holder freed: ${refs.join(",")}`)), "10 seconds")
      })
    ).pipe(Effect.provide(memory({ namespace: "kube-system", retryBaseDelay: Duration.millis(5) }))))
})
