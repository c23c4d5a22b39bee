/**
 * The invariant monitor over the in-memory cluster's caches, under TestClock: a violation is
 * reported only once it has lasted --invariant-grace, with one Warning Event per pod it involves
 * however often it is evaluated again, counted in invariant_violations{kind} while it lasts; one
 * that heals within the grace is never reported; one that comes back is a new violation.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, TestClock } from "effect"
import { PODS_PER_TURN, betweenTurns, makeInvariantMonitor } from "../../src/programs/invariants.ts"
import { Caches } from "../../src/services/Caches.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import { Metrics } from "../../src/services/Metrics.ts"
import * as R from "../../src/services/resources.ts"
import { memory } from "../../src/testing/layers.ts"
import { metric, settle, settleUntil } from "../support/controller.ts"
import { networkStatus, podObject, poolObject } from "../support/objects.ts"
import { createNad, eventsIn } from "../support/world.ts"

const NS = "default"
const POOLS = "kube-system"
const POOL = "10.30.0.0-24"
const HELD_FOR_ANOTHER = "IP address 10.30.0.1 that pod default/a lists on network default/net1 is allocated to default/someone-else in IPPool 10.30.0.0-24"

const api = <A, E>(f: (k: typeof KubeApi.Service) => Effect.Effect<A, E>) => Effect.flatMap(KubeApi, f)
const gauge = (kind: string) => metric("invariant_violations", { kind })
const warnings = Effect.map(eventsIn(NS), (events) => events.filter((e) => e.type === "Warning"))

/** Pool 10.30.0.0/24 holding 10.30.0.1 for `podref`, its reservation for a, and pod a running on it. */
const world = (podref: string) =>
  Effect.gen(function* () {
    yield* createNad(NS, "net1", { range: "10.30.0.0/24" })
    yield* api((k) => k.create(R.IPPools, POOLS, poolObject(POOLS, POOL, "10.30.0.0/24", { "1": { id: "c1", podref, ifname: "net1" } })))
    yield* api((k) => k.create(R.OverlappingRangeIPReservations, POOLS, { metadata: { name: "10.30.0.1", namespace: POOLS }, spec: { podref: `${NS}/a` } }))
    const pod = podObject(NS, "a", { nodeName: "node-1", status: networkStatus([{ name: `${NS}/net1`, interface: "net1", ips: ["10.30.0.1"] }]) })
    yield* api((k) => k.create(R.Pods, NS, { ...pod, status: { phase: "Running" } }))
    const caches = yield* Caches
    yield* caches.awaitSynced
    yield* settleUntil(() => Effect.sync(() => Option.isSome(caches.pods.get(`${NS}/a`)) && Option.isSome(caches.pools.get(POOL))), "the pod and the pool cached")
  })

/** Rewrites the pool's entry at offset 1 to name `podref`, and waits until the cache has it. */
const entryNames = (podref: string) =>
  Effect.gen(function* () {
    yield* api((k) => k.patch(R.IPPools, POOLS, POOL, { type: "merge", body: { spec: { allocations: { "1": { id: "c1", podref, ifname: "net1" } } } } }))
    const caches = yield* Caches
    yield* settleUntil(() => Effect.sync(() => Option.exists(caches.pools.get(POOL), (p) => p.pool.entries[0]?.podref === podref)), `the cached entry naming ${podref}`)
  })

const withMonitor = <A, E, R>(body: Effect.Effect<A, E, R>) => body.pipe(Effect.scoped, Effect.provide(memory({ namespace: POOLS, invariantGrace: Duration.minutes(1), invariantInterval: Duration.minutes(1) })))

describe("the invariant monitor (TestClock)", () => {
  it.effect("reports a violation once it has lasted the grace: the gauge, one Warning on the pod however often it is judged again, then 0 once fixed", () =>
    withMonitor(
      Effect.gen(function* () {
        yield* world(`${NS}/someone-else`)
        const monitor = yield* makeInvariantMonitor
        yield* monitor.evaluate
        expect(yield* gauge("held-for-another")).toBe(0)
        yield* TestClock.adjust("59 seconds")
        yield* monitor.evaluate
        expect(yield* gauge("held-for-another")).toBe(0)
        expect(yield* warnings).toEqual([])

        yield* TestClock.adjust("1 second")
        yield* monitor.evaluate
        expect(yield* gauge("held-for-another")).toBe(1)
        expect(yield* gauge("live-not-held")).toBe(0)
        const once = [expect.objectContaining({ type: "Warning", reason: "IPAddressHeldForAnother", message: HELD_FOR_ANOTHER, name: "a", count: 1 })]
        expect(yield* warnings).toEqual(once)

        for (let i = 0; i < 3; i++) {
          yield* TestClock.adjust("1 minute")
          yield* monitor.evaluate
        }
        expect(yield* gauge("held-for-another")).toBe(1)
        expect(yield* warnings).toEqual(once)

        yield* entryNames(`${NS}/a`)
        yield* monitor.evaluate
        expect(yield* gauge("held-for-another")).toBe(0)
        expect(yield* warnings).toEqual(once)
      })
    ))

  it.effect("a disagreement that heals within the grace is never reported; one that comes back is a new violation with its own grace", () =>
    withMonitor(
      Effect.gen(function* () {
        yield* world(`${NS}/someone-else`)
        const monitor = yield* makeInvariantMonitor
        yield* monitor.evaluate
        yield* TestClock.adjust("30 seconds")
        yield* entryNames(`${NS}/a`)
        yield* monitor.evaluate
        yield* TestClock.adjust("1 minute")
        yield* monitor.evaluate
        expect(yield* gauge("held-for-another")).toBe(0)
        expect(yield* warnings).toEqual([])

        yield* entryNames(`${NS}/someone-else`)
        yield* monitor.evaluate
        yield* TestClock.adjust("59 seconds")
        yield* monitor.evaluate
        expect(yield* warnings).toEqual([])
        yield* TestClock.adjust("1 second")
        yield* monitor.evaluate
        expect(yield* gauge("held-for-another")).toBe(1)
        expect((yield* warnings).map((e) => e.reason)).toEqual(["IPAddressHeldForAnother"])
      })
    ))

  it.effect("judges the caches again only once they have changed: an idle cluster costs no evaluation, and its violation is still reported after the grace", () =>
    withMonitor(
      Effect.gen(function* () {
        yield* world(`${NS}/someone-else`)
        const caches = yield* Caches
        let reads = 0
        const counted = { ...caches, pods: { ...caches.pods, get byKey() { return (reads++, caches.pods.byKey) } } }
        const monitor = yield* Effect.provideService(makeInvariantMonitor, Caches, counted)
        for (let i = 0; i < 3; i++) {
          yield* monitor.evaluate
          yield* TestClock.adjust("30 seconds")
        }
        expect(reads).toBe(1)
        expect(yield* gauge("held-for-another")).toBe(1)
        yield* entryNames(`${NS}/a`)
        yield* monitor.evaluate
        expect(reads).toBe(2)
        expect(yield* gauge("held-for-another")).toBe(0)
      })
    ))

  it.effect("runs on its interval: the first evaluation at once, the report one interval later", () =>
    withMonitor(
      Effect.gen(function* () {
        yield* world(`${NS}/someone-else`)
        const monitor = yield* makeInvariantMonitor
        const fiber = yield* Effect.fork(monitor.run)
        yield* settle
        expect(yield* gauge("held-for-another")).toBe(0)
        yield* TestClock.adjust("1 minute")
        yield* settleUntil(() => Effect.map(gauge("held-for-another"), (n) => n === 1), "reported after one interval")
        expect((yield* warnings).map((e) => `${e.reason} ${e.name}`)).toEqual(["IPAddressHeldForAnother a"])
        yield* Fiber.interrupt(fiber)
      })
    ))

  it.effect("a leader that steps down drops its gauge; the healthy world reports nothing", () =>
    withMonitor(
      Effect.gen(function* () {
        yield* world(`${NS}/a`)
        const monitor = yield* makeInvariantMonitor
        yield* monitor.evaluate
        yield* TestClock.adjust("2 minutes")
        yield* monitor.evaluate
        for (const kind of ["live-not-held", "held-for-another", "duplicate", "reservation-drift"]) expect(yield* gauge(kind), kind).toBe(0)
        expect(yield* warnings).toEqual([])
        yield* Effect.flatMap(Metrics, (m) => m.leader(false))
        expect(yield* gauge("duplicate")).toBeUndefined()
      })
    ))
})

describe("an evaluation over many pods", () => {
  it.effect(`gives the event loop a turn at each pause (every ${PODS_PER_TURN} pods): I/O and timers due meanwhile run before it goes on`, () =>
    Effect.gen(function* () {
      const ranBeforeResuming: Array<boolean> = []
      function* steps(): Generator<void, string> {
        for (let i = 0; i < 3; i++) {
          let ran = false
          setImmediate(() => void (ran = true))
          yield
          ranBeforeResuming.push(ran)
        }
        return "judged"
      }
      expect(yield* betweenTurns(steps())).toBe("judged")
      expect(ranBeforeResuming).toEqual([true, true, true])
    }))
})
