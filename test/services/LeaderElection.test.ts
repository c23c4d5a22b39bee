import { describe, expect, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Exit, Fiber, Layer, Option, Ref, type Scope, Stream, TestClock } from "effect"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { InMemoryCluster, layerMemory } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as LeaderElection from "../../src/services/LeaderElection.ts"
import * as R from "../../src/services/resources.ts"

const START = Date.parse("2026-11-03T10:00:00Z")
const NS = "kube-system"
const LEASE = "whereabouts-gc"

/** One cluster per test; every elector built in the test shares it. */
const cluster = Layer.provideMerge(layerMemory, InMemoryCluster.layer())

/** Whether the elector leads now: the first element of `changes`. */
const leads = (le: LeaderElection.LeaderElection["Type"]) => Effect.map(Stream.runHead(le.changes), Option.getOrThrow)

/** An elector with its own identity (and config), over the test's cluster; `isLeader` reads `leads`. */
const elector = (identity: string, overrides: Partial<ControllerConfig.ControllerConfigShape> = {}) =>
  LeaderElection.make.pipe(
    Effect.provide(ControllerConfig.layerWith({ identity, ...overrides })),
    Effect.map((le) => ({ ...le, isLeader: leads(le) }))
  )

/** Lets forked fibers run until all are suspended, without moving the clock. */
const settle = TestClock.adjust(0)
/** Moves the clock in 1 s steps (TestClock runs every sleep on the way at its own time anyway). */
const advance = (duration: Duration.DurationInput) =>
  Effect.gen(function*() {
    let left = Duration.toMillis(duration)
    while (left > 0) {
      const step = Math.min(1_000, left)
      yield* TestClock.adjust(Duration.millis(step))
      left -= step
    }
  })

interface LeaseSpec {
  readonly holderIdentity: string
  readonly leaseDurationSeconds: number
  readonly acquireTime: string
  readonly renewTime: string
  readonly leaseTransitions: number
}
const leaseSpec = Effect.map(InMemoryCluster, (c) => {
  const leases = c.snapshot(R.Leases, NS)
  expect(leases).toHaveLength(1)
  return leases[0]!["spec"] as LeaseSpec
})
const at = (millisAfterStart: number) => new Date(START + millisAfterStart).toISOString().replace("Z", "000Z")

/** Work that counts its starts and interruptions. */
const trackedWork = Effect.gen(function*() {
  const started = yield* Ref.make(0)
  const interrupted = yield* Ref.make(0)
  const work = Effect.zipRight(Ref.update(started, (n) => n + 1), Effect.never).pipe(
    Effect.onInterrupt(() => Ref.update(interrupted, (n) => n + 1))
  )
  return { work, started: Ref.get(started), interrupted: Ref.get(interrupted) }
})

const scoped = <A, E>(body: Effect.Effect<A, E, InMemoryCluster | KubeApi | Scope.Scope>) =>
  Effect.zipRight(TestClock.setTime(START), body).pipe(Effect.provide(cluster))

describe("LeaderElection: one candidate", () => {
  it.scoped("becomes leader at once, writes the lease and renews it every retryPeriod", () =>
    scoped(
      Effect.gen(function*() {
        const le = yield* elector("a")
        const w = yield* trackedWork
        expect(yield* le.isLeader).toBe(false)
        yield* Effect.fork(le.runWhenLeader(w.work))
        yield* settle
        expect(yield* le.isLeader).toBe(true)
        expect(yield* w.started).toBe(1)
        expect(yield* leaseSpec).toEqual({
          holderIdentity: "a",
          leaseDurationSeconds: 15,
          acquireTime: "2026-11-03T10:00:00.000000Z",
          renewTime: "2026-11-03T10:00:00.000000Z",
          leaseTransitions: 0
        })

        yield* advance("2 seconds")
        expect((yield* leaseSpec).renewTime).toBe("2026-11-03T10:00:02.000000Z")
        yield* advance("60 seconds")
        expect(yield* leaseSpec).toEqual({
          holderIdentity: "a",
          leaseDurationSeconds: 15,
          acquireTime: at(0),
          renewTime: at(62_000),
          leaseTransitions: 0
        })
        expect(yield* le.isLeader).toBe(true)
        expect(yield* w.started).toBe(1)
        expect(yield* w.interrupted).toBe(0)
        // Renewals take the optimistic path: one PUT each, no re-read.
        const c = yield* InMemoryCluster
        expect(c.count({ verb: "replace", resource: "leases" })).toBe(31)
        expect(c.count({ verb: "get", resource: "leases" })).toBe(1)
      })
    ))

  it.scoped("loses leadership once renewals fail for renewDeadline, interrupts the work, then campaigns again", () =>
    scoped(
      Effect.gen(function*() {
        const c = yield* InMemoryCluster
        const le = yield* elector("a")
        const w = yield* trackedWork
        const history = yield* Ref.make<ReadonlyArray<boolean>>([])
        yield* Effect.fork(Stream.runForEach(le.changes, (v) => Ref.update(history, (h) => [...h, v])))
        yield* Effect.fork(le.runWhenLeader(w.work))
        yield* settle
        expect(yield* le.isLeader).toBe(true)

        c.injectFault({ verb: "replace", resource: "leases", times: 1_000 })
        yield* advance(Duration.millis(9_900))
        expect(yield* le.isLeader).toBe(true)
        expect(yield* w.interrupted).toBe(0)
        yield* advance(Duration.millis(100))
        expect(yield* le.isLeader).toBe(false)
        expect(yield* w.interrupted).toBe(1)
        expect(yield* Ref.get(history)).toEqual([false, true, false])

        // The API recovers: nobody else took the lease, so we lead again and the work restarts.
        c.clearFaults()
        yield* advance("5 seconds")
        expect(yield* le.isLeader).toBe(true)
        expect(yield* w.started).toBe(2)
        expect(yield* Ref.get(history)).toEqual([false, true, false, true])
        expect((yield* leaseSpec)).toMatchObject({ holderIdentity: "a", acquireTime: at(0), leaseTransitions: 0 })
      })
    ))

  it.scoped("steps down at once when the lease shows another holder", () =>
    scoped(
      Effect.gen(function*() {
        const api = yield* KubeApi
        const le = yield* elector("a")
        const w = yield* trackedWork
        yield* Effect.fork(le.runWhenLeader(w.work))
        yield* settle
        // Someone overwrote the lease (an operator, or a candidate with a broken clock).
        const lease = yield* api.get(R.Leases, NS, LEASE)
        yield* api.replace(R.Leases, NS, { ...lease, spec: { ...(lease["spec"] as object), holderIdentity: "intruder" } })
        yield* advance("2 seconds")
        expect(yield* le.isLeader).toBe(false)
        expect(yield* w.interrupted).toBe(1)
        expect((yield* leaseSpec).holderIdentity).toBe("intruder")
      })
    ))

  it.scoped("with leaderElect false the work runs at once, without a lease", () =>
    scoped(
      Effect.gen(function*() {
        const c = yield* InMemoryCluster
        const le = yield* elector("a", { leaderElect: false })
        const w = yield* trackedWork
        const fiber = yield* Effect.fork(le.runWhenLeader(w.work))
        yield* settle
        expect(yield* w.started).toBe(1)
        expect(yield* le.isLeader).toBe(true)
        expect(Chunk.toReadonlyArray(yield* Stream.runCollect(Stream.take(le.changes, 1)))).toEqual([true])
        expect(c.count({ resource: "leases" })).toBe(0)
        yield* Fiber.interrupt(fiber)
        expect(yield* w.interrupted).toBe(1)
      })
    ))

  it.scoped("runWhenLeader fails with the work's failure and releases the lease", () =>
    scoped(
      Effect.gen(function*() {
        const le = yield* elector("a")
        const exit = yield* Effect.exit(le.runWhenLeader(Effect.fail("boom" as const)))
        expect(exit).toEqual(Exit.fail("boom"))
        expect(yield* le.isLeader).toBe(false)
        expect((yield* leaseSpec)).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1 })
      })
    ))

  it.scoped("interrupted, it waits for the work to finish draining, and only then releases the lease", () =>
    scoped(
      Effect.gen(function*() {
        const le = yield* elector("a")
        const holderAfterDrain = yield* Ref.make<string | undefined>(undefined)
        // A drain of 3 s, as the deletion loop's on SIGTERM: the lease must stay ours meanwhile.
        const work = Effect.never.pipe(
          Effect.onInterrupt(() => Effect.zipRight(Effect.sleep("3 seconds"), Effect.flatMap(leaseSpec, (l) => Ref.set(holderAfterDrain, l.holderIdentity))))
        )
        const fiber = yield* Effect.fork(le.runWhenLeader(work))
        yield* settle
        const stopping = yield* Effect.fork(Fiber.interrupt(fiber))
        yield* advance("2 seconds")
        expect(stopping.unsafePoll()).toBeNull()
        expect(yield* le.isLeader).toBe(true)
        expect((yield* leaseSpec).holderIdentity).toBe("a")
        yield* advance("1 second")
        yield* Fiber.join(stopping)
        expect(yield* Ref.get(holderAfterDrain)).toBe("a")
        expect((yield* leaseSpec).holderIdentity).toBe("")
        expect(yield* le.isLeader).toBe(false)
      })
    ))

  it.scoped("a release that hangs gives up after renewDeadline, so shutdown is bounded", () =>
    scoped(
      Effect.gen(function*() {
        const c = yield* InMemoryCluster
        const le = yield* elector("a")
        const fiber = yield* Effect.fork(le.runWhenLeader(Effect.never))
        yield* settle
        c.injectFault({ verb: "replace", resource: "leases", reason: "stall" })
        const stopping = yield* Effect.fork(Fiber.interrupt(fiber))
        yield* advance(Duration.millis(9_000))
        expect(stopping.unsafePoll()).toBeNull()
        yield* advance(Duration.millis(1_000))
        expect(Exit.isInterrupted(yield* Fiber.join(stopping))).toBe(true)
        expect((yield* leaseSpec).holderIdentity).toBe("a")
      })
    ))

  it.scoped("a release that conflicts (a renewal the server applied after all) reads the lease again and releases it", () =>
    scoped(
      Effect.gen(function*() {
        const api = yield* KubeApi
        const c = yield* InMemoryCluster
        const le = yield* elector("a")
        const fiber = yield* Effect.fork(le.runWhenLeader(Effect.never))
        yield* settle
        // What an interrupted renewal leaves behind: the lease still names us, at a newer version.
        const lease = yield* api.get(R.Leases, NS, LEASE)
        yield* api.replace(R.Leases, NS, { ...lease, spec: { ...(lease["spec"] as object), renewTime: at(500) } })
        yield* Fiber.interrupt(fiber)
        expect(yield* leaseSpec).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1, leaseTransitions: 0 })
        // The test's write, the release that conflicted, the release from the fresh copy.
        expect(c.count({ verb: "replace", resource: "leases" })).toBe(3)
      })
    ))

  it.scoped("a release that conflicts because someone else took the lease leaves it to them", () =>
    scoped(
      Effect.gen(function*() {
        const api = yield* KubeApi
        const le = yield* elector("a")
        const fiber = yield* Effect.fork(le.runWhenLeader(Effect.never))
        yield* settle
        const lease = yield* api.get(R.Leases, NS, LEASE)
        yield* api.replace(R.Leases, NS, { ...lease, spec: { ...(lease["spec"] as object), holderIdentity: "b", leaseTransitions: 1 } })
        yield* Fiber.interrupt(fiber)
        expect(yield* leaseSpec).toMatchObject({ holderIdentity: "b", leaseDurationSeconds: 15, leaseTransitions: 1 })
      })
    ))

  it("runs with client-go's timings, which keep its rule: the leader gives up before anyone may take over, after more than one jittered retry", () => {
    const [lease, renew, retry] = [ControllerConfig.LEASE_DURATION, ControllerConfig.RENEW_DEADLINE, ControllerConfig.RETRY_PERIOD].map(Duration.toMillis) as [number, number, number]
    expect([lease, renew, retry]).toEqual([15_000, 10_000, 2_000])
    expect(lease > renew && renew > LeaderElection.JITTER_FACTOR * retry && retry > 0).toBe(true)
  })
})

describe("LeaderElection: several candidates over one cluster", () => {
  it.scoped("exactly one of two candidates leads, and keeps leading", () =>
    scoped(
      Effect.gen(function*() {
        const a = yield* elector("a")
        const b = yield* elector("b")
        const wa = yield* trackedWork
        const wb = yield* trackedWork
        yield* Effect.fork(a.runWhenLeader(wa.work))
        yield* Effect.fork(b.runWhenLeader(wb.work))
        for (let second = 0; second <= 60; second++) {
          yield* advance("1 second")
          const leaders = [yield* a.isLeader, yield* b.isLeader]
          expect(leaders.filter(Boolean)).toHaveLength(1)
          expect((yield* leaseSpec).holderIdentity).toBe(leaders[0] ? "a" : "b")
        }
        expect((yield* wa.started) + (yield* wb.started)).toBe(1)
        expect((yield* leaseSpec).leaseTransitions).toBe(0)
      })
    ))

  it.scoped("a leader that stops releases the lease; the standby takes over within a jittered retryPeriod", () =>
    scoped(
      Effect.gen(function*() {
        const a = yield* elector("a")
        const b = yield* elector("b")
        const wb = yield* trackedWork
        const holderWhenWorkStopped = yield* Ref.make<string | undefined>(undefined)
        const workA = Effect.never.pipe(
          Effect.onInterrupt(() => Effect.flatMap(leaseSpec, (s) => Ref.set(holderWhenWorkStopped, s.holderIdentity)))
        )
        const fa = yield* Effect.fork(a.runWhenLeader(workA))
        yield* settle
        yield* Effect.fork(b.runWhenLeader(wb.work))
        yield* advance("20 seconds")
        expect([yield* a.isLeader, yield* b.isLeader]).toEqual([true, false])

        yield* Fiber.interrupt(fa)
        // The work stopped while we still held the lease; only then was it released.
        expect(yield* Ref.get(holderWhenWorkStopped)).toBe("a")
        expect(yield* a.isLeader).toBe(false)
        expect(yield* leaseSpec).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1, renewTime: at(20_000) })

        // b polls every 2 s × (1 + up to 1.2 jitter): at most 4.4 s, far below leaseDuration.
        yield* advance(Duration.millis(4_400))
        expect(yield* b.isLeader).toBe(true)
        expect(yield* wb.started).toBe(1)
        const spec = yield* leaseSpec
        expect(spec).toMatchObject({ holderIdentity: "b", leaseDurationSeconds: 15, leaseTransitions: 1 })
        expect(spec.acquireTime > at(20_000) && spec.acquireTime <= at(24_400)).toBe(true)
      })
    ))

  it.scoped("without a release (crash) the standby waits leaseDuration from when it last saw the lease change", () =>
    scoped(
      Effect.gen(function*() {
        const c = yield* InMemoryCluster
        const a = yield* elector("a")
        const b = yield* elector("b")
        const fa = yield* Effect.fork(a.runWhenLeader(Effect.never))
        yield* settle
        yield* Effect.fork(b.runWhenLeader(Effect.never))
        yield* advance("20 seconds")
        expect([yield* a.isLeader, yield* b.isLeader]).toEqual([true, false])

        // a dies at T = 20 s: it stops renewing and its release never reaches the server.
        c.injectFault({ verb: "replace", resource: "leases", times: 1 })
        yield* Fiber.interrupt(fa)
        expect((yield* leaseSpec).holderIdentity).toBe("a")
        // a last renewed at 20 s and b saw that change at 20 s or later: no takeover before 35 s.
        yield* advance("12 seconds")
        expect(yield* b.isLeader).toBe(false)
        expect((yield* leaseSpec).holderIdentity).toBe("a")
        // b saw that change by 24.4 s (polls are ≤ 4.4 s apart), so it expires by 39.4 s for b,
        // and b's next poll takes over by 43.8 s.
        yield* advance("13 seconds")
        expect(yield* b.isLeader).toBe(true)
        expect(yield* leaseSpec).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 })
      })
    ))

  it.scoped("expiry is judged by the local clock, never by the holder's renewTime", () =>
    scoped(
      Effect.gen(function*() {
        const api = yield* KubeApi
        // A holder whose clock is years behind ours, and one years ahead: both look "expired" or
        // "fresh" by timestamps, yet only a change of the record over time matters.
        const ghost = (renewTime: string) => ({
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name: LEASE, namespace: NS },
          spec: { holderIdentity: "ghost", leaseDurationSeconds: 15, acquireTime: renewTime, renewTime, leaseTransitions: 4 }
        })
        yield* api.create(R.Leases, NS, ghost("2001-01-01T00:00:00.000000Z"))
        const b = yield* elector("b")
        yield* Effect.fork(b.runWhenLeader(Effect.never))
        yield* advance("1 second")
        expect(yield* b.isLeader).toBe(false)

        // While the ghost keeps renewing (the record changes), b stays out, however old renewTime looks.
        for (let i = 0; i < 6; i++) {
          yield* advance("10 seconds")
          const lease = yield* api.get(R.Leases, NS, LEASE)
          const renewTime = `2001-01-01T00:00:${String(10 + i).padStart(2, "0")}.000000Z`
          yield* api.replace(R.Leases, NS, { ...lease, spec: { ...(lease["spec"] as object), renewTime } })
          expect(yield* b.isLeader).toBe(false)
        }
        // The ghost stops at 61 s; b sees that change by 65.4 s and takes over 15 s after that.
        yield* advance("14 seconds")
        expect(yield* b.isLeader).toBe(false)
        yield* advance("10 seconds")
        expect(yield* b.isLeader).toBe(true)
        expect(yield* leaseSpec).toMatchObject({ holderIdentity: "b", leaseTransitions: 5 })
      })
    ))

  it.scoped("a standby that stops leaves the lease alone", () =>
    scoped(
      Effect.gen(function*() {
        const c = yield* InMemoryCluster
        const a = yield* elector("a")
        const b = yield* elector("b")
        yield* Effect.fork(a.runWhenLeader(Effect.never))
        yield* settle
        const fb = yield* Effect.fork(b.runWhenLeader(Effect.never))
        yield* advance("5 seconds")
        const writesBefore = c.count({ verb: "replace", resource: "leases" })
        yield* Fiber.interrupt(fb)
        expect(c.count({ verb: "replace", resource: "leases" })).toBe(writesBefore)
        expect((yield* leaseSpec).holderIdentity).toBe("a")
        expect(yield* a.isLeader).toBe(true)
      })
    ))
})
