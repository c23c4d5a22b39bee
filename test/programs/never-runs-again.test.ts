/**
 * Pods that still exist but will never run again, in memory: each trigger (pod update, node
 * taint, node deletion, the grace running out, the sweep), the live re-check that keeps what may
 * still run, and a StatefulSet's replacement getting an address once the old object is gone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, TestClock } from "effect"
import { audit } from "../../src/programs/audit.ts"
import { type Candidate, freeBatch } from "../../src/programs/free-pods.ts"
import { runSweep } from "../../src/programs/sweep.ts"
import { projectPod } from "../../src/domain/pod.ts"
import { Caches } from "../../src/services/Caches.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { type RunningPod, startPod } from "../../src/testing/cni-plugin.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { memory } from "../../src/testing/layers.ts"
import { metric, on, settle, settleUntil, startDeletionLoop } from "../support/controller.ts"
import { eventually, require } from "../support/eventually.ts"
import { networkStatus, nodeObject, podObject, poolObject } from "../support/objects.ts"
import { cachesCaughtUp, createNad, eventsIn, podrefsOf, reservationNames } from "../support/world.ts"

const NS = "default"
const POOLS = "kube-system"
const OUT_OF_SERVICE = { key: "node.kubernetes.io/out-of-service", effect: "NoExecute" }

const api = <A, E>(f: (k: typeof KubeApi.Service) => Effect.Effect<A, E>) => Effect.flatMap(KubeApi, f)
const patchPod = (name: string, body: unknown) => api((k) => k.patch(R.Pods, NS, name, { type: "merge", body }))

/** Held Terminating from now on, as a node that never confirms the deletion leaves it (a finalizer here). */
const holdTerminating = (name: string) =>
  Effect.gen(function* () {
    yield* patchPod(name, { metadata: { finalizers: ["test.example/held"] } })
    yield* api((k) => k.delete(R.Pods, NS, name, { gracePeriodSeconds: 0 }))
  })

const freedOf = (pool: string, pod: RunningPod) =>
  eventually(Effect.flatMap(podrefsOf(pool), (refs) => require(() => !refs.includes(`${NS}/${pod.name}`), `${pod.name} freed`)))

/** Freed within the next second of TestClock (a timer for a deletion stamped a moment ahead of it fires). */
const freedNow = (pool: string, pod: RunningPod) =>
  Effect.zipRight(
    TestClock.adjust("1 second"),
    settleUntil(() => Effect.map(podrefsOf(pool), (refs) => !refs.includes(`${NS}/${pod.name}`)), `${pod.name} freed`)
  )

const stillThere = (name: string) => Effect.map(api((k) => Effect.either(k.get(R.Pods, NS, name))), (e) => e._tag === "Right")

describe("pods that will never run again: the triggers", () => {
  // Under TestClock from the wall clock's now: the in-memory API server stamps deletions with the
  // wall clock, the triggers judge them on Effect's clock; every timer moves only with adjust.
  it.effect("a finished pod, the taint manager's eviction, a node tainted out of service, a node deleted: each freed while its pod object remains; a running pod untouched", () =>
    Effect.zipRight(TestClock.setTime(Date.now()), Effect.scoped(
      Effect.gen(function* () {
        yield* createNad(NS, "net1", { range: "10.120.0.0/24" })
        for (const n of ["node-1", "node-2", "node-3"]) yield* api((k) => k.create(R.Nodes, undefined, nodeObject(n)))
        yield* startDeletionLoop()
        const done = yield* startPod(NS, "done", [on("net1")], "node-1")
        const evicted = yield* startPod(NS, "evicted", [on("net1")], "node-1")
        const stranded = yield* startPod(NS, "stranded", [on("net1")], "node-2")
        const orphaned = yield* startPod(NS, "orphaned", [on("net1")], "node-3")
        const running = yield* startPod(NS, "running", [on("net1")], "node-1")
        const POOL = "10.120.0.0-24"

        yield* patchPod("done", { status: { phase: "Succeeded" } })
        yield* freedNow(POOL, done)

        yield* holdTerminating("evicted")
        yield* patchPod("evicted", { status: { conditions: [{ type: "DisruptionTarget", status: "True", reason: "DeletionByTaintManager" }] } })
        yield* freedNow(POOL, evicted)

        yield* holdTerminating("stranded")
        yield* TestClock.adjust("20 millis")
        yield* api((k) => k.replace(R.Nodes, undefined, { ...nodeObject("node-2", { ready: "Unknown", taints: [OUT_OF_SERVICE] }), metadata: { name: "node-2" } }))
        yield* freedNow(POOL, stranded)

        yield* holdTerminating("orphaned")
        yield* api((k) => k.delete(R.Nodes, undefined, "node-3"))
        yield* freedNow(POOL, orphaned)

        expect(yield* podrefsOf(POOL)).toEqual([`${NS}/running`])
        expect(running.ips[0]!.ips).toEqual(["10.120.0.5"])
        expect(yield* reservationNames).toEqual(["10.120.0.5"])
        for (const name of ["done", "evicted", "stranded", "orphaned"]) expect(yield* stillThere(name)).toBe(true)
        yield* settleUntil(() => Effect.map(eventsIn(NS), (es) => es.length === 4), "four Events written")
        const events = yield* eventsIn(NS)
        expect(events.map((e) => `${e.name}: ${e.message}`).sort()).toEqual([
          "done: successful cleanup of IP address [10.120.0.1] from network net1 (pod Succeeded)",
          "evicted: successful cleanup of IP address [10.120.0.2] from network net1 (pod evicted by the taint manager)",
          "orphaned: successful cleanup of IP address [10.120.0.4] from network net1 (node gone)",
          "stranded: successful cleanup of IP address [10.120.0.3] from network net1 (node out of service)"
        ])
        for (const [trigger, n] of [["terminal", 1], ["evicted", 1], ["out-of-service", 1], ["node-gone", 1]] as const) {
          yield* settleUntil(() => Effect.map(metric("ips_freed_total", { trigger }), (v) => v === n), `${trigger} counted ${n}`)
        }
      })
    ).pipe(Effect.provide(memory({ namespace: POOLS, terminatingGrace: Duration.zero })))))
})

describe("pods that will never run again: --dry-run", () => {
  it.live("a finished pod keeps its address (the trigger only reports it), while a deleted pod's is still freed", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* createNad(NS, "net1", { range: "10.121.0.0/24" })
        yield* api((k) => k.create(R.Nodes, undefined, nodeObject("node-1")))
        yield* startDeletionLoop()
        const done = yield* startPod(NS, "done", [on("net1")], "node-1")
        const gone = yield* startPod(NS, "gone", [on("net1")], "node-1")
        yield* patchPod("done", { status: { phase: "Succeeded" } })
        yield* Effect.sleep("200 millis")
        yield* api((k) => k.delete(R.Pods, NS, "gone", { gracePeriodSeconds: 0 }))
        yield* freedOf("10.121.0.0-24", gone)
        yield* Effect.sleep("300 millis")
        expect(yield* podrefsOf("10.121.0.0-24")).toEqual([`${NS}/${done.name}`])
        expect(yield* metric("ips_freed_total", { trigger: "terminal" })).toBe(0)
        expect(yield* metric("ips_freed_total", { trigger: "deletion" })).toBe(1)
      })
    ).pipe(Effect.provide(memory({ namespace: POOLS, dryRun: true }))))
})

describe("pods that will never run again: the grace and the live re-check (TestClock)", () => {
  const START = Date.parse("2026-11-03T10:00:00Z")
  /** A pod terminating since START on `node` (deleted with grace 0, held by a finalizer), holding 10.121.0.1 (and its reservation), as the API server and the plugin left it. */
  const terminatingPod = (node: string) =>
    Effect.gen(function* () {
      yield* createNad(NS, "net1", { range: "10.121.0.0/24" })
      yield* api((k) => k.create(R.IPPools, POOLS, poolObject(POOLS, "10.121.0.0-24", "10.121.0.0/24", { "1": { id: "c1", podref: `${NS}/t`, ifname: "net1" } })))
      yield* api((k) => k.create(R.OverlappingRangeIPReservations, POOLS, { metadata: { name: "10.121.0.1", namespace: POOLS }, spec: { podref: `${NS}/t`, ifname: "net1" } }))
      const pod = podObject(NS, "t", { nodeName: node, status: networkStatus([{ name: `${NS}/net1`, interface: "net1", ips: ["10.121.0.1"] }]) })
      yield* api((k) => k.create(R.Pods, NS, { ...pod, metadata: { ...pod.metadata, finalizers: ["test.example/held"], deletionTimestamp: new Date(START).toISOString(), deletionGracePeriodSeconds: 0 } }))
    })
  const holder = Effect.map(podrefsOf("10.121.0.0-24"), (refs) => refs)

  /** The body under TestClock at START, the world built after the clock was set (informers' watch timeouts start then). */
  const atStart = <A, E, R>(body: Effect.Effect<A, E, R>) =>
    Effect.zipRight(TestClock.setTime(START), body.pipe(Effect.scoped, Effect.provide(memory({ namespace: POOLS, terminatingGrace: Duration.seconds(30) }))))

  /** The terminating pod on node-1, tainted out of service, with the deletion loop running and the pod cached; answers the caches. */
  const strandedAndWatched = Effect.gen(function* () {
    yield* api((k) => k.create(R.Nodes, undefined, nodeObject("node-1", { ready: "Unknown", taints: [OUT_OF_SERVICE] })))
    yield* terminatingPod("node-1")
    const caches = yield* Caches
    yield* startDeletionLoop()
    yield* settleUntil(() => Effect.sync(() => Option.isSome(caches.pods.get(`${NS}/t`))), "the pod cached")
    return caches
  })

  it.effect("a terminating pod on an out-of-service node: kept within --terminating-grace, freed when it runs out (no event needed)", () =>
    atStart(Effect.gen(function* () {
      yield* strandedAndWatched
      yield* TestClock.adjust("29 seconds")
      yield* settle
      expect(yield* holder).toEqual([`${NS}/t`])
      yield* TestClock.adjust("1 second")
      yield* settleUntil(() => Effect.map(holder, (h) => h.length === 0), "freed once the grace ran out")
      expect(yield* reservationNames).toEqual([])
    })))

  /** The test clock, except that a sleep longer than `ms` ends `ms` early, as a real timer may end a little before the clock reads its time. */
  const earlyTimers = (ms: number) => <A, E, R>(body: Effect.Effect<A, E, R>) =>
    TestClock.testClockWith((clock) => {
      const sleep = (d: Duration.DurationInput) => {
        const millis = Duration.toMillis(d)
        return clock.sleep(Duration.millis(millis > ms ? millis - ms : millis))
      }
      const early = new Proxy(clock, {
        get: (target, p) => {
          if (p === "sleep") return sleep
          const value: unknown = Reflect.get(target, p, target)
          return typeof value === "function" ? value.bind(target) : value
        }
      })
      return Effect.withClock(body, early)
    })

  it.effect("a grace timer that fires before the clock reads its time sleeps again, and the pod is freed once its time has come", () =>
    earlyTimers(50)(atStart(Effect.gen(function* () {
      yield* strandedAndWatched
      yield* TestClock.adjust("29900 millis")
      yield* settle
      expect(yield* holder).toEqual([`${NS}/t`])
      // The timer fires at 29.95 s, 50 ms before the grace runs out.
      yield* TestClock.adjust("60 millis")
      yield* settle
      expect(yield* holder).toEqual([`${NS}/t`])
      yield* TestClock.adjust("50 millis")
      yield* settleUntil(() => Effect.map(holder, (h) => h.length === 0), "freed once the grace ran out")
    }))))

  it.effect("opt-in --free-on-notready-after: the node's Ready change is the trigger; kept while NotReady for less than that, freed once it has been that long", () =>
    Effect.zipRight(
      TestClock.setTime(START),
      Effect.gen(function* () {
        yield* api((k) => k.create(R.Nodes, undefined, nodeObject("node-1", { ready: "True" })))
        yield* terminatingPod("node-1")
        const caches = yield* Caches
        yield* startDeletionLoop()
        yield* settleUntil(() => Effect.sync(() => Option.isSome(caches.pods.get(`${NS}/t`))), "the pod cached")
        // Past its grace, but on a Ready node: kept.
        yield* TestClock.adjust("40 seconds")
        yield* settle
        expect(yield* holder).toEqual([`${NS}/t`])
        const current = yield* api((k) => k.get(R.Nodes, undefined, "node-1"))
        const since = new Date(START + 40_000).toISOString()
        yield* api((k) => k.replace(R.Nodes, undefined, { ...nodeObject("node-1", { ready: "False", readySince: since }), metadata: { name: "node-1", resourceVersion: current.metadata.resourceVersion } }))
        yield* settleUntil(() => Effect.sync(() => caches.nodes.get("node-1").pipe(Option.exists((n) => n.ready === "False"))), "the NotReady node cached")
        yield* TestClock.adjust("59 seconds")
        yield* settle
        expect(yield* holder).toEqual([`${NS}/t`])
        yield* TestClock.adjust("1 second")
        yield* settleUntil(() => Effect.map(holder, (h) => h.length === 0), "freed once NotReady for 60 s")
        expect(yield* reservationNames).toEqual([])
        expect(yield* metric("ips_freed_total", { trigger: "not-ready" })).toBe(1)
      }).pipe(Effect.scoped, Effect.provide(memory({ namespace: POOLS, terminatingGrace: Duration.seconds(30), freeOnNotReadyAfter: Duration.seconds(60) })))
    ))

  it.effect("the out-of-service taint removed before the grace ran out: kept; the node's change stopped the pod's timer, so nothing is read or written when the grace runs out", () =>
    atStart(Effect.gen(function* () {
      const caches = yield* strandedAndWatched
      yield* TestClock.adjust("10 seconds")
      const current = yield* api((k) => k.get(R.Nodes, undefined, "node-1"))
      yield* api((k) => k.replace(R.Nodes, undefined, { ...nodeObject("node-1", { ready: "True" }), metadata: { name: "node-1", resourceVersion: current.metadata.resourceVersion } }))
      yield* settleUntil(() => Effect.sync(() => Option.exists(caches.nodes.get("node-1"), (n) => !n.outOfService)), "the node's change cached")
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      yield* TestClock.adjust("30 seconds")
      yield* settle
      expect(cluster.count({ verb: "get", resource: "nodes" })).toBe(0)
      expect(cluster.count({ verb: "patch", resource: "ippools" })).toBe(0)
      expect(yield* metric("free_batch_duration_seconds_count", {})).toBe(0)
      expect(yield* holder).toEqual([`${NS}/t`])
      expect(yield* reservationNames).toEqual(["10.121.0.1"])
    })))

  it.effect("a pod deleted while its grace ran: freed once, by the deletion; its timer stops with it (no second reconcile, no look again later)", () =>
    atStart(Effect.gen(function* () {
      yield* strandedAndWatched
      yield* TestClock.adjust("10 seconds")
      // The node confirms the deletion: the finalizer goes, the object with it.
      yield* patchPod("t", { metadata: { finalizers: [] } })
      yield* settleUntil(() => Effect.map(holder, (refs) => refs.length === 0), "t freed by its deletion")
      expect(yield* metric("ips_freed_total", { trigger: "deletion" })).toBe(1)
      const batches = yield* metric("free_batch_duration_seconds_count", {})
      // Past the grace, and past a look again 30 s after that.
      yield* TestClock.adjust("30 seconds")
      yield* settle
      yield* TestClock.adjust("31 seconds")
      yield* settle
      expect(yield* metric("free_batch_duration_seconds_count", {})).toBe(batches)
      expect(yield* metric("ips_freed_total", { trigger: "out-of-service" })).toBe(0)
    })))
})

describe("pods that will never run again: the re-check of a candidate", () => {
  const candidateWorld = Effect.gen(function* () {
    yield* createNad(NS, "net1", { range: "10.122.0.0/24" })
    const pod = yield* startPod(NS, "j", [on("net1")], "node-1")
    const seen = projectPod((yield* api((k) => k.get(R.Pods, NS, "j"))) as Parameters<typeof projectPod>[0])
    yield* cachesCaughtUp
    return { pod, seen }
  })

  it.effect("the cache said Succeeded, the live pod runs: kept", () =>
    Effect.gen(function* () {
      const { seen } = yield* candidateWorld
      const candidate: Candidate = { claim: "NeverRunsAgain", pod: { ...seen, phase: "Succeeded" }, reason: "terminal" }
      const [r] = yield* freeBatch([candidate])
      expect(r!.outcome).toEqual({ _tag: "Kept", why: `pod ${NS}/j may run again` })
      expect(yield* podrefsOf("10.122.0.0-24")).toEqual([`${NS}/j`])
    }).pipe(Effect.provide(memory())))

  it.effect("another incarnation under the name: kept", () =>
    Effect.gen(function* () {
      const { seen } = yield* candidateWorld
      yield* patchPod("j", { status: { phase: "Succeeded" } })
      const candidate: Candidate = { claim: "NeverRunsAgain", pod: { ...seen, uid: "an-older-one", phase: "Succeeded" }, reason: "terminal" }
      const [r] = yield* freeBatch([candidate])
      expect(r!.outcome).toMatchObject({ _tag: "Kept", why: expect.stringContaining("exists again") })
      expect(yield* podrefsOf("10.122.0.0-24")).toEqual([`${NS}/j`])
    }).pipe(Effect.provide(memory())))

  it.effect("the cache said its node is out of service, the live node is not: kept (a terminating pod's node is read before the write)", () =>
    Effect.gen(function* () {
      const { seen } = yield* candidateWorld
      yield* api((k) => k.create(R.Nodes, undefined, nodeObject("node-1", { ready: "True" })))
      yield* holdTerminating("j")
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      const candidate: Candidate = { claim: "NeverRunsAgain", pod: { ...seen, deletionTimestamp: new Date().toISOString() }, reason: "out-of-service" }
      const [r] = yield* freeBatch([candidate])
      expect(cluster.count({ verb: "get", resource: "nodes", name: "node-1" })).toBe(1)
      expect(r!.outcome).toEqual({ _tag: "Kept", why: `pod ${NS}/j may run again` })
      expect(yield* podrefsOf("10.122.0.0-24")).toEqual([`${NS}/j`])
    }).pipe(Effect.provide(memory({ terminatingGrace: Duration.zero }))))

  it.effect("still finished at the re-check: freed, counted under its reason", () =>
    Effect.gen(function* () {
      const { seen } = yield* candidateWorld
      yield* patchPod("j", { status: { phase: "Failed" } })
      const [r] = yield* freeBatch([{ claim: "NeverRunsAgain", pod: { ...seen, phase: "Failed" }, reason: "terminal" }])
      expect(r!.outcome).toEqual({ _tag: "Freed", freed: [{ ip: "10.122.0.1", pool: "10.122.0.0-24", network: "net1" }], reservations: 1 })
      expect(yield* metric("ips_freed_total", { trigger: "terminal" })).toBe(1)
    }).pipe(Effect.provide(memory())))
})

describe("pods that will never run again: the sweep and audit", () => {
  it.effect("audit lists a finished pod's address as an orphan with its reason; a dry run frees nothing; the sweep frees it", () =>
    Effect.gen(function* () {
      yield* createNad(NS, "net1", { range: "10.123.0.0/24" })
      yield* startPod(NS, "job-x", [on("net1")], "node-1")
      yield* startPod(NS, "web", [on("net1")], "node-1")
      yield* api((k) => k.create(R.Nodes, undefined, nodeObject("node-1")))
      yield* patchPod("job-x", { status: { phase: "Succeeded" } })
      const report = yield* audit("table")
      expect(report.exitCode).toBe(1)
      expect(report.text).toContain("the pod still exists but will never run again (pod Succeeded)")
      expect((yield* runSweep({ dryRun: true })).freed).toBe(0)
      expect(yield* podrefsOf("10.123.0.0-24")).toEqual([`${NS}/job-x`, `${NS}/web`])
      const swept = yield* runSweep({ dryRun: false })
      expect(swept).toMatchObject({ freed: 1, reservationsDeleted: 1 })
      expect(swept.orphanAllocations.map((o) => [o.entry.podref, o.reason, o.detail])).toEqual([[`${NS}/job-x`, "NeverRunsAgain", "pod Succeeded"]])
      expect(yield* podrefsOf("10.123.0.0-24")).toEqual([`${NS}/web`])
      expect(yield* metric("ips_freed_total", { trigger: "terminal" })).toBe(1)
      expect((yield* eventsIn(NS)).map((e) => e.message)).toEqual(["successful cleanup of IP address [10.123.0.1] from network net1 (pod Succeeded)"])
    }).pipe(Effect.provide(memory())))
})

describe("pods that will never run again: a StatefulSet's replacement", () => {
  it.live("a StatefulSet pod stranded on a dead node is freed while its object remains; once it is gone its replacement gets an address from the full pool", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* createNad(NS, "net1", { range: "10.124.0.0/30" })
        for (const n of ["node-1", "node-2"]) yield* api((k) => k.create(R.Nodes, undefined, nodeObject(n)))
        yield* startDeletionLoop()
        yield* startPod(NS, "db-0", [on("net1")], "node-1")
        const db1 = yield* startPod(NS, "db-1", [on("net1")], "node-2")
        expect(db1.ips[0]!.ips).toEqual(["10.124.0.2"])
        yield* holdTerminating("db-1")
        yield* api((k) => k.replace(R.Nodes, undefined, { ...nodeObject("node-2", { ready: "Unknown", taints: [OUT_OF_SERVICE] }), metadata: { name: "node-2" } }))
        yield* freedOf("10.124.0.0-30", db1)
        expect(yield* stillThere("db-1")).toBe(true)
        // The StatefulSet controller creates the replacement only once the old object is gone.
        yield* patchPod("db-1", { metadata: { finalizers: [] } })
        yield* eventually(Effect.flatMap(stillThere("db-1"), (there) => require(() => !there, "old db-1 gone")))
        const replacement = yield* startPod(NS, "db-1", [on("net1")], "node-1")
        expect(replacement.ips[0]!.ips).toEqual(["10.124.0.2"])
        expect(yield* podrefsOf("10.124.0.0-30")).toEqual([`${NS}/db-0`, `${NS}/db-1`])
      })
    ).pipe(Effect.provide(memory({ terminatingGrace: Duration.zero }))))
})
