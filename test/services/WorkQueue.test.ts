import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, FastCheck as fc, Fiber, Option, Schedule, TestClock } from "effect"
import * as WorkQueue from "../../src/services/WorkQueue.ts"

/** Lets forked fibers run until all are suspended, without moving the clock. */
const settle = TestClock.adjust(0)

/** Runs an effect that should finish now; the TestClock bounds the wait, so a bug fails rather than hangs. */
const soon = <A, E>(effect: Effect.Effect<A, E>) =>
  effect.pipe(
    Effect.timeoutFail({ duration: "1 second", onTimeout: () => new Error("did not finish") }),
    TestClock.adjustWith("1 second")
  )
const joinSoon = <A, E>(fiber: Fiber.Fiber<A, E>) => soon(Fiber.join(fiber))

/** One key, as a worker takes it: a batch of at most one. */
const take = <V>(q: WorkQueue.WorkQueue<V>) => Effect.map(q.takeBatch(1), Option.map((batch) => batch[0]!))

/** Takes a key that must be ready now: a blocked take here is a failed expectation, not a hang. */
const takeReady = <V>(q: WorkQueue.WorkQueue<V>) =>
  Effect.gen(function*() {
    expect(yield* q.len).toBeGreaterThan(0)
    return Option.getOrThrow(yield* take(q))
  })

/** Processes one ready key: take then done. */
const cycle = <V>(q: WorkQueue.WorkQueue<V>) =>
  Effect.gen(function*() {
    const item = yield* takeReady(q)
    yield* q.done(item.key)
    return item
  })

/** Asserts the next rate-limited requeue of `key` lands exactly `millis` later. */
const expectRequeueAfter = (q: WorkQueue.WorkQueue<number>, key: string, millis: number) =>
  Effect.gen(function*() {
    expect(yield* q.addRateLimited(key, 0)).toBe(true)
    yield* TestClock.adjust(Duration.millis(millis - 1))
    expect(yield* q.len).toBe(0)
    yield* TestClock.adjust(Duration.millis(1))
    expect(yield* q.len).toBe(1)
    expect((yield* cycle(q)).key).toBe(key)
  })

describe("WorkQueue: client-go queue semantics", () => {
  it.scoped("a waiting key is queued once and carries the latest value", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<string>()
      yield* q.add("a", "v1")
      yield* q.add("b", "b1")
      yield* q.add("a", "v2")
      expect(yield* q.len).toBe(2)
      expect(yield* takeReady(q)).toEqual({ key: "a", value: "v2" })
      expect(yield* takeReady(q)).toEqual({ key: "b", value: "b1" })
      expect(yield* q.len).toBe(0)
      expect(yield* q.inFlight).toBe(2)
    }))

  it.scoped("distinct keys come out in FIFO order", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      for (const key of ["c", "a", "e", "b", "d"]) yield* q.add(key, 0)
      const order: Array<string> = []
      for (let i = 0; i < 5; i++) order.push((yield* cycle(q)).key)
      expect(order).toEqual(["c", "a", "e", "b", "d"])
    }))

  it.scoped("a key added while held goes to no other worker until done, then exactly once", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      yield* q.add("a", 1)
      expect(yield* takeReady(q)).toEqual({ key: "a", value: 1 })
      yield* q.add("a", 2)
      yield* q.add("a", 3)
      expect(yield* q.len).toBe(0)
      const second = yield* Effect.fork(take(q))
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(second))).toBe(true)

      yield* q.done("a")
      expect(yield* joinSoon(second)).toEqual(Option.some({ key: "a", value: 3 }))
      expect(yield* q.inFlight).toBe(1)
      yield* q.done("a")
      expect(yield* q.len).toBe(0)
      expect(yield* q.inFlight).toBe(0)
    }))

  it.scoped("done without a re-add does not requeue; a stray done is a no-op", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      yield* q.add("a", 1)
      yield* cycle(q)
      yield* q.done("a")
      yield* q.done("never-added")
      expect(yield* q.len).toBe(0)
      expect(yield* q.inFlight).toBe(0)
      const taker = yield* Effect.fork(take(q))
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(taker))).toBe(true)
      yield* q.add("b", 2)
      expect(yield* joinSoon(taker)).toEqual(Option.some({ key: "b", value: 2 }))
    }))

  it.scoped("a taker interrupted while waiting does not strand a key", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      const handled: Array<string> = []
      // The documented worker shape: the key is released even if the worker is interrupted.
      const worker = Effect.uninterruptibleMask((restore) =>
        take(q).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.void,
            onSome: ({ key }) =>
              restore(Effect.sync(() => void handled.push(key))).pipe(Effect.ensuring(q.done(key)))
          }))
        )
      )
      const first = yield* Effect.fork(worker)
      const second = yield* Effect.fork(worker)
      const third = yield* Effect.fork(worker)
      yield* settle
      yield* Fiber.interrupt(first)
      yield* q.add("a", 1)
      // Woken, but interrupted before it could run: its wake-up must pass on.
      yield* Fiber.interrupt(second)
      yield* joinSoon(third)
      expect(handled).toEqual(["a"])
      expect(yield* q.len).toBe(0)
      expect(yield* q.inFlight).toBe(0)
    }))

  it.scoped("awaitIdle completes only once every held key is done", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      yield* q.awaitIdle // nothing held: immediate
      yield* q.add("a", 1)
      yield* q.add("b", 2)
      yield* q.add("c", 3) // waiting, not held: awaitIdle does not wait for it
      yield* takeReady(q)
      yield* takeReady(q)
      const idle = yield* Effect.fork(q.awaitIdle)
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(idle))).toBe(true)
      yield* q.done("a")
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(idle))).toBe(true)
      yield* q.done("b")
      yield* joinSoon(idle)
      expect(yield* q.inFlight).toBe(0)
      expect(yield* q.len).toBe(1)
    }))
})

describe("WorkQueue: keys", () => {
  it.scoped("keys are those waiting and those held, not those still delayed", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      yield* q.add("held", 1)
      yield* takeReady(q)
      yield* q.add("waiting", 2)
      yield* q.addAfter("delayed", 3, "1 second")
      expect([...(yield* q.keys)].sort()).toEqual(["held", "waiting"])
      yield* q.done("held")
      yield* cycle(q)
      expect([...(yield* q.keys)]).toEqual([])
    }))
  it.scoped("a timed add: the earliest time since the key was last taken comes out with it, once", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      yield* q.add("a", 1, 100)
      yield* q.add("a", 2, 200)
      yield* q.add("b", 1)
      expect(yield* takeReady(q)).toEqual({ key: "a", value: 2, waitingSince: 100 })
      expect(yield* takeReady(q)).toEqual({ key: "b", value: 1 })
      // Added while held: timed from then, handed out when it is taken again.
      yield* q.add("a", 3, 300)
      yield* q.done("a")
      expect(yield* takeReady(q)).toEqual({ key: "a", value: 3, waitingSince: 300 })
      yield* q.done("a")
      // Delayed and rate-limited adds are not timed.
      yield* q.addAfter("a", 4, 0)
      expect(yield* takeReady(q)).toEqual({ key: "a", value: 4 })
    }))
})

describe("WorkQueue: delays and rate limiting", () => {
  it.scoped("addAfter adds once the delay has passed", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<string>()
      yield* q.addAfter("a", "later", "1 second")
      yield* q.addAfter("b", "now", 0)
      expect((yield* cycle(q)).key).toBe("b")
      yield* TestClock.adjust("999 millis")
      expect(yield* q.len).toBe(0)
      yield* TestClock.adjust("1 millis")
      expect(yield* takeReady(q)).toEqual({ key: "a", value: "later" })
    }))

  it.scoped("rate-limited requeues back off 5 ms, 10 ms, 20 ms … per key", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      for (const millis of [5, 10, 20, 40, 80, 160]) yield* expectRequeueAfter(q, "a", millis)
      expect(yield* q.numRequeues("a")).toBe(6)
      // Another key has its own backoff.
      yield* expectRequeueAfter(q, "b", 5)
      expect(yield* q.numRequeues("b")).toBe(1)
    }))

  it.scoped("the per-key backoff is capped at 1000 s", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      // 5 ms · 2^17 = 655.36 s is the last uncapped delay; 5 ms · 2^18 would be 1310.72 s.
      for (let i = 0; i < 18; i++) yield* expectRequeueAfter(q, "a", 5 * 2 ** i)
      yield* expectRequeueAfter(q, "a", 1_000_000)
      yield* expectRequeueAfter(q, "a", 1_000_000)
    }))

  it.scoped("forget resets the backoff", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      yield* expectRequeueAfter(q, "a", 5)
      yield* expectRequeueAfter(q, "a", 10)
      yield* q.forget("a")
      expect(yield* q.numRequeues("a")).toBe(0)
      yield* expectRequeueAfter(q, "a", 5)
    }))

  it.scoped("a spent custom backoff makes addRateLimited return false and add nothing", () =>
    Effect.gen(function*() {
      const backoff = Schedule.exponential("10 millis").pipe(Schedule.intersect(Schedule.recurs(2)))
      const q = yield* WorkQueue.make<number>({ backoff })
      yield* expectRequeueAfter(q, "a", 10)
      yield* expectRequeueAfter(q, "a", 20)
      expect(yield* q.addRateLimited("a", 0)).toBe(false)
      yield* TestClock.adjust("1 hour")
      expect(yield* q.len).toBe(0)
      expect(yield* q.numRequeues("a")).toBe(2)
      yield* q.forget("a")
      yield* expectRequeueAfter(q, "a", 10)
    }))

  it.scoped("the overall bucket allows a burst of 100, then 10 per second; the longer of backoff and bucket wins", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      for (let i = 0; i < 102; i++) expect(yield* q.addRateLimited(`k${i}`, i)).toBe(true)
      yield* TestClock.adjust("5 millis") // the per-key backoff of the first 100
      expect(yield* q.len).toBe(100)
      yield* TestClock.adjust("94 millis")
      expect(yield* q.len).toBe(100)
      yield* TestClock.adjust("1 millis") // the 101st token exists 100 ms after the burst
      expect(yield* q.len).toBe(101)
      yield* TestClock.adjust("99 millis")
      expect(yield* q.len).toBe(101)
      yield* TestClock.adjust("1 millis")
      expect(yield* q.len).toBe(102)
      // Ten seconds later the bucket is full again: another burst waits only for its backoff.
      yield* TestClock.adjust("10 seconds")
      for (let i = 0; i < 100; i++) yield* q.addRateLimited(`m${i}`, i)
      yield* TestClock.adjust("5 millis")
      expect(yield* q.len).toBe(202)
    }))
})

describe("WorkQueue: shutdown", () => {
  it.scoped("wakes blocked takers with none, ignores adds and drops delayed adds", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      const blocked = yield* Effect.fork(take(q))
      yield* settle
      yield* q.addAfter("delayed", 1, "1 second")
      expect(yield* q.addRateLimited("limited", 1)).toBe(true)
      yield* q.shutdown
      expect(yield* joinSoon(blocked)).toEqual(Option.none())

      yield* q.add("late", 1)
      yield* q.addAfter("late-delayed", 1, "1 millis")
      expect(yield* q.addRateLimited("late-limited", 1)).toBe(true)
      yield* TestClock.adjust("1 hour")
      expect(yield* q.len).toBe(0)
      expect(yield* take(q)).toEqual(Option.none())
    }))

  it.scoped("hands out no more work even while keys wait, and held keys can still be done", () =>
    Effect.gen(function*() {
      const q = yield* WorkQueue.make<number>()
      yield* q.add("held", 1)
      yield* q.add("waiting", 2)
      yield* takeReady(q)
      yield* q.shutdown
      expect(yield* take(q)).toEqual(Option.none())
      const idle = yield* Effect.fork(q.awaitIdle)
      yield* q.done("held")
      yield* joinSoon(idle)
      expect(yield* q.inFlight).toBe(0)
    }))
})

describe("WorkQueue: concurrent workers", () => {
  const scenario = {
    workers: fc.integer({ min: 1, max: 4 }),
    // Each add: key, how many times the producer yields first, how long a worker holds it.
    adds: fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 4 })), {
      minLength: 1,
      maxLength: 60
    }),
    producers: fc.integer({ min: 1, max: 3 })
  }

  it.scoped.prop(
    "no key is held by two workers; each key's last added value is processed",
    scenario,
    ({ adds, producers, workers }) =>
      Effect.gen(function*() {
        const q = yield* WorkQueue.make<{ readonly seq: number; readonly hold: number }>()
        const holders = new Set<string>()
        const violations: Array<string> = []
        const processed = new Map<string, Set<number>>()
        const lastAdded = new Map<string, number>()

        const worker = Effect.gen(function*() {
          while (true) {
            const next = yield* take(q)
            if (Option.isNone(next)) return
            const { key, value } = next.value
            if (holders.has(key)) violations.push(key)
            holders.add(key)
            processed.set(key, (processed.get(key) ?? new Set()).add(value.seq))
            for (let i = 0; i < value.hold; i++) yield* Effect.yieldNow()
            holders.delete(key)
            yield* q.done(key)
          }
        })
        // Each key belongs to one producer, so "its last add" is well defined across fibers.
        const producer = (p: number) =>
          Effect.forEach(adds, ([k, pause, hold], seq) =>
            k % producers !== p ? Effect.void : Effect.gen(function*() {
              for (let i = 0; i < pause; i++) yield* Effect.yieldNow()
              lastAdded.set(`k${k}`, seq)
              yield* q.add(`k${k}`, { seq, hold })
            }), { discard: true })

        const workerFibers = yield* Effect.forEach(Array.from({ length: workers }), () => Effect.fork(worker))
        yield* Effect.forEach(Array.from({ length: producers }, (_, p) => p), producer, {
          concurrency: "unbounded",
          discard: true
        })
        let spins = 0
        while ((yield* q.len) > 0 || (yield* q.inFlight) > 0) {
          if (++spins > 100_000) throw new Error("queue never drained")
          yield* Effect.yieldNow()
        }
        yield* q.shutdown
        yield* soon(Fiber.joinAll(workerFibers))

        expect(violations).toEqual([])
        for (const [key, seq] of lastAdded) expect(processed.get(key)?.has(seq), key).toBe(true)
      }),
    { fastCheck: { numRuns: 200 } }
  )
})

describe("WorkQueue.takeBatch", () => {
  it.scoped("hands out every waiting key up to max, each held until done", () =>
    Effect.gen(function* () {
      const q = yield* WorkQueue.make<number>()
      for (let i = 0; i < 5; i++) yield* q.add(`k${i}`, i)
      const first = Option.getOrThrow(yield* q.takeBatch(3))
      expect(first.map((w) => w.key)).toEqual(["k0", "k1", "k2"])
      expect(yield* q.inFlight).toBe(3)
      yield* q.add("k1", 10)
      const second = Option.getOrThrow(yield* q.takeBatch(10))
      expect(second.map((w) => w.key)).toEqual(["k3", "k4"])
      for (const w of first) yield* q.done(w.key)
      const third = Option.getOrThrow(yield* q.takeBatch(1))
      expect(third).toEqual([{ key: "k1", value: 10 }])
    }))
})
