import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Either, Fiber, Schedule, SubscriptionRef, TestClock } from "effect"
import { deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { memory } from "../../src/testing/layers.ts"
import type { RunningLoop } from "../../src/programs/deletion-loop.ts"
import { runController } from "../../src/programs/run.ts"
import { runSweep, sweepUntilDone } from "../../src/programs/sweep.ts"
import { onSchedule } from "../../src/programs/schedule.ts"
import { parseSchedule } from "../../src/domain/cron.ts"
import { formatIP } from "../../src/domain/ip.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { metric, on, startDeletionLoop } from "../support/controller.ts"
import { eventually, require } from "../support/eventually.ts"
import { ApiHooks, type MemoryEnv, memoryWithHooks, once } from "../support/hooks.ts"
import { networkStatus, podObject, poolObject } from "../support/objects.ts"
import { createNad, eventsIn, reservationNames } from "../support/world.ts"

const NS = "default"
const POOL_NS = "kube-system"

type Alloc = Record<string, { id: string; podref: string; ifname?: string }>

const api = <A, E>(f: (k: typeof KubeApi.Service) => Effect.Effect<A, E>) => Effect.flatMap(KubeApi, f)
const createPool = (name: string, range: string, allocations: Alloc) => api((k) => k.create(R.IPPools, POOL_NS, poolObject(POOL_NS, name, range, allocations)))
const createReservation = (name: string, podref: string) =>
  api((k) => k.create(R.OverlappingRangeIPReservations, POOL_NS, { metadata: { name, namespace: POOL_NS }, spec: { podref } }))
/** A running pod whose Multus status lists these IPs on these interfaces. */
const livePod = (name: string, ips: ReadonlyArray<{ readonly network: string; readonly iface: string; readonly ip: string }>) =>
  api((k) =>
    k.create(
      R.Pods,
      NS,
      podObject(NS, name, {
        nodeName: "node-1",
        status: networkStatus([
          { name: "cluster-network", interface: "eth0", ips: ["10.244.0.9"], default: true },
          ...ips.map((i) => ({ name: i.network, interface: i.iface, ips: [i.ip] }))
        ])
      })
    )
  )
const rawAllocations = (pool: string) =>
  Effect.map(InMemoryCluster, (c) => (c.snapshot(R.IPPools, POOL_NS).find((p) => p.metadata.name === pool)!["spec"] as { allocations: Alloc }).allocations)
const gc = (name: string, ip: string, network: string) =>
  expect.objectContaining({
    type: "Normal",
    reason: "IPAddressGarbageCollected",
    message: `successful cleanup of IP address [${ip}] from network ${network}`,
    name,
    count: 1
  })

describe("sweep: upstream reconciler cases", () => {
  it.live("a dead pod's allocation is freed, a live pod's kept; one Event for the freed address", () =>
    Effect.gen(function* () {
      yield* createNad(NS, "net1", { range: "10.30.0.0/24" })
      yield* createPool("10.30.0.0-24", "10.30.0.0/24", {
        "1": { id: "c1", podref: "default/live", ifname: "net1" },
        "2": { id: "c2", podref: "default/dead", ifname: "net1" }
      })
      yield* livePod("live", [{ network: "default/net1", iface: "net1", ip: "10.30.0.1" }])
      const report = yield* runSweep({ dryRun: false })
      expect(report).toMatchObject({ dryRun: false, freed: 1, reservationsDeleted: 0, spared: 0 })
      expect(report.orphanAllocations.map((o) => [o.pool, o.entry.podref, formatIP(o.entry.ip), o.reason])).toEqual([
        ["10.30.0.0-24", "default/dead", "10.30.0.2", "PodGone"]
      ])
      expect(yield* rawAllocations("10.30.0.0-24")).toEqual({ "1": { id: "c1", podref: "default/live", ifname: "net1" } })
      expect(yield* eventsIn(NS)).toEqual([gc("dead", "10.30.0.2", "net1")])
      expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(1)
      expect(report.pools).toEqual([{ name: "10.30.0.0-24", range: "10.30.0.0/24", network: "", size: 254, sizeFrom: "config", used: 2, free: 252, orphans: 1, invalid: 0 }])
    }).pipe(Effect.provide(memory())))

  it.live("the same podref under two offsets, the pod holding one: only the other is freed", () =>
    Effect.gen(function* () {
      yield* createPool("10.32.0.0-24", "10.32.0.0/24", {
        "4": { id: "old", podref: "default/p", ifname: "net1" },
        "5": { id: "new", podref: "default/p", ifname: "net1" }
      })
      yield* livePod("p", [{ network: "default/net1", iface: "net1", ip: "10.32.0.5" }])
      const report = yield* runSweep({ dryRun: false })
      expect(report.orphanAllocations.map((o) => [formatIP(o.entry.ip), o.reason])).toEqual([["10.32.0.4", "IPNotOnPod"]])
      expect(report.freed).toBe(1)
      expect(yield* rawAllocations("10.32.0.0-24")).toEqual({ "5": { id: "new", podref: "default/p", ifname: "net1" } })
    }).pipe(Effect.provide(memory())))

  it.live("reservation orphans (IPv4, IPv6, named networks) are deleted; held reservations kept", () =>
    Effect.gen(function* () {
      yield* createPool("10.33.0.0-24", "10.33.0.0/24", { "1": { id: "a", podref: "default/v4", ifname: "net1" } })
      yield* createPool("fd00-33---120", "fd00:33::/120", { "5": { id: "b", podref: "default/v6", ifname: "net2" } })
      yield* createPool("blue-10.34.0.0-24", "10.34.0.0/24", { "5": { id: "c", podref: "default/named", ifname: "net3" } })
      yield* livePod("v4", [{ network: "default/net1", iface: "net1", ip: "10.33.0.1" }])
      yield* livePod("v6", [{ network: "default/net2", iface: "net2", ip: "fd00:33::5" }])
      yield* livePod("named", [{ network: "default/named", iface: "net3", ip: "10.34.0.5" }])
      // Held: each live pod's own address.
      yield* createReservation("10.33.0.1", "default/v4")
      yield* createReservation("fd00-33--5", "default/v6")
      yield* createReservation("blue-10.34.0.5", "default/named")
      // Orphans: no allocation behind them (pod alive), or their pod is gone.
      yield* createReservation("10.33.0.9", "default/v4")
      yield* createReservation("fd00-33--9", "default/gone6")
      yield* createReservation("fd00-33--a", "default/v6")
      yield* createReservation("blue-10.34.0.6", "default/gone")
      yield* createReservation("blue-10.34.0.7", "default/named")

      const report = yield* runSweep({ dryRun: false })
      expect(report.orphanReservations.map((o) => `${o.name} ${o.reason}`).sort()).toEqual([
        "10.33.0.9 NoAllocation",
        "blue-10.34.0.6 PodGone",
        "blue-10.34.0.7 NoAllocation",
        "fd00-33--9 PodGone",
        "fd00-33--a NoAllocation"
      ])
      expect(report).toMatchObject({ freed: 0, reservationsDeleted: 5, spared: 0 })
      expect(yield* reservationNames).toEqual(["10.33.0.1", "blue-10.34.0.5", "fd00-33--5"])
      expect(yield* metric("reservations_deleted_total", { trigger: "sweep" })).toBe(5)
    }).pipe(Effect.provide(memory())))

  it.live("a pending pod without network-status keeps its address; once it is gone, the next sweep frees it", () =>
    Effect.gen(function* () {
      const k = yield* KubeApi
      yield* createPool("10.35.0.0-24", "10.35.0.0/24", { "3": { id: "c", podref: "default/pending", ifname: "net1" } })
      yield* k.create(R.Pods, NS, { ...podObject(NS, "pending", { nodeName: "node-1", networks: "net1" }), status: { phase: "Pending" } })
      const first = yield* runSweep({ dryRun: false })
      expect(first.orphanAllocations).toEqual([])
      expect(Object.keys(yield* rawAllocations("10.35.0.0-24"))).toEqual(["3"])

      yield* k.delete(R.Pods, NS, "pending", { gracePeriodSeconds: 0 })
      const second = yield* runSweep({ dryRun: false })
      expect(second.orphanAllocations.map((o) => [o.entry.podref, o.reason])).toEqual([["default/pending", "PodGone"]])
      expect(second.freed).toBe(1)
      expect(yield* rawAllocations("10.35.0.0-24")).toEqual({})
    }).pipe(Effect.provide(memory())))
})

describe("sweep: start-up, schedule, dry run, junk", () => {
  it.live("after downtime the start-up sweep frees what was deleted while no controller ran", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* createNad(NS, "net1", { range: "10.36.0.0/24" })
        const pods = []
        for (let i = 0; i < 6; i++) pods.push(yield* startPod(NS, `p${i}`, [on("net1")]))
        // Downtime: three pods vanish without CNI DEL and no deletion loop sees it.
        for (const p of pods.slice(0, 3)) yield* deletePod(p)
        yield* startDeletionLoop(Effect.asVoid(sweepUntilDone({ dryRun: false })))
        // startDeletionLoop returns once onSynced (the sweep) is done.
        expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(3)
        expect(yield* metric("ips_freed_total", { trigger: "deletion" })).toBe(0)
        expect(yield* metric("sweeps_total", { result: "success" })).toBe(1)
        expect(Object.values(yield* rawAllocations("10.36.0.0-24")).map((a) => a.podref).sort()).toEqual(["default/p3", "default/p4", "default/p5"])
        expect(yield* reservationNames).toEqual(pods.slice(3).map((p) => p.ips[0]!.ips[0]!).sort())
        expect((yield* eventsIn(NS)).map((e) => e.name).sort()).toEqual(["p0", "p1", "p2"])
      })
    ).pipe(Effect.provide(memory({ namespace: POOL_NS }))))

  it.effect("a sweep that fails runs again after 1 s, then 2 s, until one succeeds: what it finds is not left to the next scheduled sweep", () =>
    Effect.gen(function* () {
      const cluster = yield* InMemoryCluster
      const sweeps = (result: string) => Effect.map(metric("sweeps_total", { result }), (n) => n ?? 0)
      yield* createPool("10.38.0.0-24", "10.38.0.0/24", { "1": { id: "c", podref: "default/dead", ifname: "net1" } })
      // The API server refuses the first two attempts' pool list (a 429 storm, say).
      cluster.injectFault({ verb: "list", resource: "ippools", times: 2, reason: "TooManyRequests" })
      const fiber = yield* Effect.fork(sweepUntilDone({ dryRun: false }, Schedule.exponential("1 second")))
      yield* TestClock.adjust("500 millis")
      expect([yield* sweeps("failure"), yield* sweeps("success")]).toEqual([1, 0])
      yield* TestClock.adjust("1 second")
      expect([yield* sweeps("failure"), yield* sweeps("success")]).toEqual([2, 0])
      expect(Object.keys(yield* rawAllocations("10.38.0.0-24"))).toEqual(["1"])
      yield* TestClock.adjust("2 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result.freed).toBe(1)
      expect([yield* sweeps("failure"), yield* sweeps("success")]).toEqual([2, 1])
      expect(yield* rawAllocations("10.38.0.0-24")).toEqual({})
    }).pipe(Effect.provide(memory({ namespace: POOL_NS }))))

  it.effect("the cron schedule fires at every match (*/5, UTC) and each run sweeps", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-11-03T10:02:30Z"))
      const sweeps = () => Effect.map(metric("sweeps_total", { result: "success" }), (n) => n ?? 0)
      const body = Effect.gen(function* () {
        yield* createPool("10.37.0.0-24", "10.37.0.0/24", { "1": { id: "c", podref: "default/dead", ifname: "net1" } })
        const current = yield* SubscriptionRef.make({ schedule: Either.getOrThrow(parseSchedule("*/5 * * * *")), source: "test" })
        const fiber = yield* Effect.fork(onSchedule(current, sweepUntilDone({ dryRun: false })))
        const at = [] as Array<number>
        // 10:02:30 → 10:21:30 in 30 s steps, noting the sweep count after each.
        for (let i = 0; i < 39; i++) {
          at.push(yield* sweeps())
          yield* TestClock.adjust("30 seconds")
        }
        yield* Fiber.interrupt(fiber)
        // Index i is 10:02:30 + 30 s × i: sweeps at 10:05:00 (i = 5), 10:10 (15), 10:15 (25), 10:20 (35).
        const changes = at.flatMap((n, i) => (i > 0 && n !== at[i - 1] ? [i] : []))
        expect(changes).toEqual([5, 15, 25, 35])
        expect(at[4]).toBe(0) // nothing at 10:04:30
        expect(at[at.length - 1]).toBe(4)
        expect(yield* rawAllocations("10.37.0.0-24")).toEqual({})
        expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(1)
      })
      yield* body.pipe(Effect.provide(memory()))
    }))

  it.effect("a monthly schedule fires: no single sleep is longer than a JS timer can wait", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-11-03T10:00:00Z"))
      // effect runs sleeps on setTimeout, which cannot wait more than 2^31 - 1 ms (effect then
      // never wakes); the TestClock has no such limit, so record what the schedule asks for.
      const test = yield* Effect.clock
      const asked: Array<number> = []
      const recording: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => test.unsafeCurrentTimeMillis(),
        unsafeCurrentTimeNanos: () => test.unsafeCurrentTimeNanos(),
        currentTimeMillis: test.currentTimeMillis,
        currentTimeNanos: test.currentTimeNanos,
        sleep: (d) => {
          asked.push(Duration.toMillis(d))
          return test.sleep(d)
        }
      }
      const runs: Array<string> = []
      const current = yield* SubscriptionRef.make({ schedule: Either.getOrThrow(parseSchedule("0 3 1 * *")), source: "test" })
      const fiber = yield* Effect.fork(Effect.withClock(onSchedule(current, Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => void runs.push(new Date(t).toISOString())))), recording))
      // Day by day to 2027-03-10: runs on the first of December, January, February and March.
      for (let day = 0; day < 127; day++) yield* TestClock.adjust("1 day")
      yield* Fiber.interrupt(fiber)
      expect(runs).toEqual(["2026-12-01T03:00:00.000Z", "2027-01-01T03:00:00.000Z", "2027-02-01T03:00:00.000Z", "2027-03-01T03:00:00.000Z"])
      expect(asked.length).toBeGreaterThan(4)
      expect(Math.max(...asked)).toBeLessThanOrEqual(2 ** 31 - 1)
    }))

  it.live("dry run frees nothing and reports what it would free", () =>
    Effect.gen(function* () {
      yield* createPool("10.38.0.0-24", "10.38.0.0/24", {
        "1": { id: "a", podref: "default/live", ifname: "net1" },
        "2": { id: "b", podref: "default/dead", ifname: "net1" },
        "3": { id: "c", podref: "default/dead2", ifname: "net1" }
      })
      yield* livePod("live", [{ network: "default/net1", iface: "net1", ip: "10.38.0.1" }])
      yield* createReservation("10.38.0.2", "default/dead")
      const before = yield* rawAllocations("10.38.0.0-24")
      const report = yield* runSweep({ dryRun: true })
      expect(report).toMatchObject({ dryRun: true, freed: 0, reservationsDeleted: 0, spared: 0 })
      expect(report.orphanAllocations.map((o) => `${o.pool} ${o.entry.key} ${o.entry.podref} ${o.reason}`)).toEqual([
        "10.38.0.0-24 2 default/dead PodGone",
        "10.38.0.0-24 3 default/dead2 PodGone"
      ])
      expect(report.orphanReservations.map((o) => `${o.name} ${o.podref} ${o.reason}`)).toEqual(["10.38.0.2 default/dead PodGone"])
      expect(report.pools).toEqual([{ name: "10.38.0.0-24", range: "10.38.0.0/24", network: "", size: 254, sizeFrom: "range", used: 3, free: 251, orphans: 2, invalid: 0 }])
      expect(yield* rawAllocations("10.38.0.0-24")).toEqual(before)
      expect(yield* reservationNames).toEqual(["10.38.0.2"])
      expect(yield* eventsIn(NS)).toEqual([])
      expect(yield* metric("orphans", { kind: "allocation", dry_run: "true" })).toBe(2)
      expect(yield* metric("orphans", { kind: "reservation", dry_run: "true" })).toBe(1)
      expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(0)
    }).pipe(Effect.provide(memory())))

  it.live("junk offsets are reported as invalid, never rewritten, and do not stop the sweep", () =>
    Effect.gen(function* () {
      const junk = { abc: { id: "x", podref: "default/dead" }, "-1": { id: "y", podref: "default/dead" }, "007": { id: "z", podref: "default/dead" } }
      yield* createPool("10.39.0.0-24", "10.39.0.0/24", { ...junk, "2": { id: "w", podref: "default/dead", ifname: "net1" } })
      const report = yield* runSweep({ dryRun: false })
      expect(report.pools).toEqual([{ name: "10.39.0.0-24", range: "10.39.0.0/24", network: "", size: 254, sizeFrom: "range", used: 1, free: 253, orphans: 1, invalid: 3 }])
      expect(report.freed).toBe(1)
      expect(yield* rawAllocations("10.39.0.0-24")).toEqual(junk)
      // And again: still there, still reported, nothing else to do.
      const again = yield* runSweep({ dryRun: false })
      expect(again).toMatchObject({ freed: 0, orphanAllocations: [], pools: [{ invalid: 3 }] })
      expect(yield* rawAllocations("10.39.0.0-24")).toEqual(junk)
    }).pipe(Effect.provide(memory())))
})

describe("sweep: default-network addresses", () => {
  it.live("whereabouts as the pod network's IPAM (default: true in network-status, upstream #638): the live pod keeps it, with or without ifname", () =>
    Effect.gen(function* () {
      yield* createPool("10.33.0.0-24", "10.33.0.0/24", {
        "1": { id: "c1", podref: "default/vm", ifname: "eth0" },
        "2": { id: "c2", podref: "default/old-vm" }
      })
      yield* api((k) => k.create(R.Pods, NS, podObject(NS, "vm", { nodeName: "node-1", status: networkStatus([{ name: "kubevirt-net", interface: "eth0", ips: ["10.33.0.1"], default: true }]) })))
      yield* api((k) =>
        k.create(
          R.Pods,
          NS,
          podObject(NS, "old-vm", {
            nodeName: "node-1",
            status: networkStatus([{ name: "kubevirt-net", interface: "eth0", ips: ["10.33.0.2"], default: true }, { name: `${NS}/other`, interface: "net1", ips: ["10.99.0.1"] }])
          })
        )
      )
      const report = yield* runSweep({ dryRun: false })
      expect(report.orphanAllocations).toEqual([])
      expect(report.freed).toBe(0)
      expect(Object.keys(yield* rawAllocations("10.33.0.0-24"))).toEqual(["1", "2"])
    }).pipe(Effect.provide(memory())))
})

describe("sweep: what the deletion loop holds", () => {
  it.live("deleted pods the loop is freeing or has queued are left to it by a sweep meanwhile: each freed once, its Event names the pod's uid, counted as a deletion", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const hooks = yield* ApiHooks
        yield* createNad(NS, "net1", { range: "10.39.0.0/24" })
        yield* createNad(NS, "net2", { range: "10.39.1.0/24" })
        const first = yield* startPod(NS, "q0", [on("net2")])
        const second = yield* startPod(NS, "p0", [on("net1")])
        // The loop's write of q0's pool is held until the sweep has run; p0, deleted meanwhile, waits its turn.
        const writing = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        hooks.before = once((c) => c.verb === "patch" && c.name === "10.39.1.0-24", () => Effect.zipRight(Deferred.succeed(writing, undefined), Deferred.await(gate)))
        const handle = yield* Deferred.make<RunningLoop>()
        yield* startDeletionLoop((loop) => Deferred.succeed(handle, loop))
        const loop = yield* Deferred.await(handle)
        // A failed expectation still lets the held write go, so the loop can stop.
        yield* Effect.addFinalizer(() => Deferred.succeed(gate, undefined))
        yield* deletePod(first)
        yield* Deferred.await(writing)
        yield* deletePod(second)
        yield* eventually(Effect.flatMap(loop.podrefsHeld, (held) => require(() => held.has("default/p0"), "p0 queued")))
        const report = yield* runSweep({ dryRun: false, leave: loop.podrefsHeld })
        expect(report.orphanAllocations.map((o) => o.entry.podref).sort()).toEqual(["default/p0", "default/q0"])
        expect(report).toMatchObject({ freed: 0, reservationsDeleted: 0 })
        yield* Deferred.succeed(gate, undefined)
        for (const pool of ["10.39.0.0-24", "10.39.1.0-24"]) {
          yield* eventually(Effect.flatMap(rawAllocations(pool), (a) => require(() => Object.keys(a).length === 0, `${pool} emptied`)))
        }
        expect(yield* reservationNames).toEqual([])
        const uids = Effect.map(api((k) => k.list(R.Events, NS)), (l) => l.items.map((e) => (e as unknown as { involvedObject: { name: string; uid?: string } }).involvedObject))
        const byName = (a: { readonly name: string }, b: { readonly name: string }) => a.name.localeCompare(b.name)
        expect((yield* eventsIn(NS)).sort(byName)).toEqual([gc("p0", second.ips[0]!.ips[0]!, "net1"), gc("q0", first.ips[0]!.ips[0]!, "net2")])
        expect((yield* uids).map((o) => `${o.name} ${o.uid}`).sort()).toEqual([`p0 ${second.uid}`, `q0 ${first.uid}`])
        expect(yield* metric("ips_freed_total", { trigger: "deletion" })).toBe(2)
        expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(0)
      })
    ).pipe(Effect.provide(memoryWithHooks({ namespace: POOL_NS }))))
})

describe("sweep: the live re-check", () => {
  it.live("a candidate whose pod was re-created between the list and the free is spared", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<MemoryEnv>()
      yield* createPool("10.40.0.0-24", "10.40.0.0/24", { "7": { id: "c", podref: "default/web-0", ifname: "net1" } })
      yield* createReservation("10.40.0.7", "default/web-0")
      // Right after the sweep listed the pods (web-0 missing), web-0 comes back holding 10.40.0.7.
      hooks.after = once(
        (c) => c.verb === "list" && c.resource === "pods",
        () => livePod("web-0", [{ network: "default/net1", iface: "net1", ip: "10.40.0.7" }]).pipe(Effect.provide(env), Effect.orDie, Effect.asVoid)
      )
      const report = yield* runSweep({ dryRun: false })
      expect(report.orphanAllocations.map((o) => `${o.entry.podref} ${o.reason}`)).toEqual(["default/web-0 PodGone"])
      expect(report.orphanReservations.map((o) => `${o.name} ${o.reason}`)).toEqual(["10.40.0.7 PodGone"])
      expect(report).toMatchObject({ freed: 0, reservationsDeleted: 0, spared: 2 })
      expect(yield* rawAllocations("10.40.0.0-24")).toEqual({ "7": { id: "c", podref: "default/web-0", ifname: "net1" } })
      expect(yield* reservationNames).toEqual(["10.40.0.7"])
      expect(yield* eventsIn(NS)).toEqual([])
    }).pipe(Effect.provide(memoryWithHooks())))

  // Before the first write the re-ADD keeps the reservation it finds; the sweep deletes it and gives it
  // back. After the delete, the re-ADD writes one itself. Either way it reads as the plugin writes
  // it: podref and ifname only.
  const moments = [
    { when: "before the sweep's first write", at: (c: { verb: string; resource: string }) => c.verb === "delete" || c.verb === "patch" },
    { when: "between its reservation delete and its pool write", at: (c: { verb: string; resource: string }) => c.verb === "patch" && c.resource === "ippools" }
  ]
  it.live.each(moments)("a pod reborn after the re-check and re-ADDed $when keeps address and reservation", ({ at }) =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<MemoryEnv>()
      yield* createNad(NS, "net1", { range: "10.41.0.0/24" })
      const first = yield* startPod(NS, "web-0", [on("net1")])
      yield* deletePod(first)
      // The sweep's re-check finds web-0 gone; then web-0 is back and its re-ADD takes the address back.
      let reborn: { containerId: string } | undefined
      hooks.before = once(
        (c) => c.resource !== "events" && at(c),
        () =>
          startPod(NS, "web-0", [on("net1")]).pipe(
            Effect.tap((p) => Effect.sync(() => void (reborn = p))),
            Effect.provide(env),
            Effect.orDie,
            Effect.asVoid
          )
      )
      const report = yield* runSweep({ dryRun: false })
      hooks.clear()
      expect(reborn).toBeDefined()
      expect(report).toMatchObject({ freed: 0, spared: 1 })
      expect(yield* rawAllocations("10.41.0.0-24")).toEqual({ "1": { id: reborn!.containerId, podref: "default/web-0", ifname: "net1" } })
      const k = yield* KubeApi
      const res = yield* k.get(R.OverlappingRangeIPReservations, POOL_NS, "10.41.0.1").pipe(Effect.either)
      expect(Either.isRight(res) && res.right["spec"]).toEqual({ podref: "default/web-0", ifname: "net1" })
      expect(yield* eventsIn(NS)).toEqual([])
    }).pipe(Effect.provide(memoryWithHooks())))
})


describe("sweep: pods from the controller's caches", () => {
  it.live("the controller's sweeps judge by the pod cache: the pods are listed once, by the informer, and what a downtime left is freed", () =>
    Effect.gen(function* () {
      const cluster = yield* InMemoryCluster
      yield* createNad(NS, "net1", { range: "10.42.0.0/24" })
      const pods = []
      for (let i = 0; i < 6; i++) pods.push(yield* startPod(NS, `p${i}`, [on("net1")]))
      for (const p of pods.slice(0, 3)) yield* deletePod(p)
      yield* Effect.forkScoped(runController)
      yield* eventually(Effect.flatMap(metric("sweeps_total", { result: "success" }), (n) => require(() => (n ?? 0) >= 1, "no start-up sweep yet")))
      expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(3)
      expect(Object.values(yield* rawAllocations("10.42.0.0-24")).map((a) => a.podref).sort()).toEqual(["default/p3", "default/p4", "default/p5"])
      expect(cluster.count({ verb: "list", resource: "pods" })).toBe(1)
      expect(cluster.count({ verb: "list", resource: "nodes" })).toBe(1)
    }).pipe(
      Effect.scoped,
      Effect.provide(memory({ healthPort: 0, metricsPort: 0, leaderElect: false, identity: "sweep-cache", reconcileSchedule: "0 0 29 2 *", namespace: POOL_NS }))
    ))

  it.live("a cache that lags behind the pools: a pod it does not hold yet is read live before anything is freed, and keeps its addresses", () =>
    Effect.gen(function* () {
      yield* createNad(NS, "net1", { range: "10.43.0.0/24" })
      const late = yield* startPod(NS, "late", [on("net1")])
      const dead = yield* startPod(NS, "dead", [on("net1")])
      yield* deletePod(dead)
      // The cache has seen neither pod yet.
      const lagging = Effect.succeed({ pods: new Map(), nodes: [], listedBy: () => [] })
      const report = yield* runSweep({ dryRun: false, pods: lagging })
      expect(report.orphanAllocations.map((o) => o.entry.podref).sort()).toEqual(["default/dead", "default/late"])
      expect(report).toMatchObject({ freed: 1, spared: 2 })
      expect(yield* rawAllocations("10.43.0.0-24")).toEqual({ "1": { id: late.containerId, podref: "default/late", ifname: "net1" } })
      expect(yield* reservationNames).toEqual([late.ips[0]!.ips[0]!])
    }).pipe(Effect.provide(memory({ namespace: POOL_NS }))))
})
