/** The Batcher on a bare WorkQueue under TestClock: gathering and the in-flight gate, no cluster. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import * as Batcher from "../../src/services/Batcher.ts"
import * as WorkQueue from "../../src/services/WorkQueue.ts"

const OPTIONS: Batcher.BatchingOptions = { ...Batcher.DEFAULT_BATCHING, windowMs: 500 }

const addMany = (queue: WorkQueue.WorkQueue<number>, from: number, n: number) =>
  Effect.forEach(Array.from({ length: n }, (_, i) => from + i), (k) => queue.add(`k${k}`, k), { discard: true })

/** Turns the event loop without moving time, so forked fibers run up to their next wait. */
const turn = Effect.repeatN(TestClock.adjust(0), 5)

const setup = (options: Partial<Batcher.BatchingOptions> = {}) =>
  Effect.gen(function* () {
    const queue = yield* WorkQueue.make<number>()
    const batcher = yield* Batcher.make(queue, { ...OPTIONS, ...options })
    return { queue, batcher }
  })

const size = (b: Option.Option<Batcher.Batch<number>>) => Option.match(b, { onNone: () => -1, onSome: (x) => x.items.length })

describe("Batcher: gathering", () => {
  it.scoped("fewer than gatherFrom queued: taken at once, no wait", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* addMany(queue, 0, OPTIONS.gatherFrom - 1)
      expect(size(yield* batcher.next)).toBe(OPTIONS.gatherFrom - 1)
    }))

  it.scoped("a mass deletion still arriving at a burst's rate is gathered for the whole window", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* addMany(queue, 0, 40)
      const next = yield* Effect.fork(batcher.next)
      // 4 every 20 ms: 200/s, above gatherMinRate.
      for (let step = 0; step < 24; step++) {
        yield* turn
        yield* addMany(queue, 100 + step * 4, 4)
        yield* TestClock.adjust("20 millis")
      }
      yield* turn
      // Still gathering at 480 ms, while the burst goes on...
      expect(Option.isNone(yield* Fiber.poll(next))).toBe(true)
      yield* TestClock.adjust("40 millis")
      const batch = yield* Fiber.join(next)
      // ...and the window ends it at 500 ms: all 24 rounds of arrivals joined the first 40.
      expect(size(batch)).toBe(40 + 24 * 4)
    }))

  it.scoped(`a stream slower than gatherMinRate ends the gathering after gatherSpanMs`, () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* addMany(queue, 0, 40)
      const next = yield* Effect.fork(batcher.next)
      let elapsed = 0
      // One every 20 ms: 50/s.
      while (Option.isNone(yield* Fiber.poll(next)) && elapsed < 1_000) {
        yield* turn
        yield* addMany(queue, 100 + elapsed, 1)
        yield* TestClock.adjust("20 millis")
        elapsed += 20
        yield* turn
      }
      expect(elapsed).toBeGreaterThanOrEqual(OPTIONS.gatherSpanMs)
      expect(elapsed).toBeLessThanOrEqual(OPTIONS.gatherSpanMs + 40)
      expect(size(yield* Fiber.join(next))).toBeGreaterThan(40)
    }))

  it.scoped("stops as soon as the batch would be full", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup({ maxBatch: 60 })
      yield* addMany(queue, 0, 40)
      const next = yield* Effect.fork(batcher.next)
      yield* turn
      yield* addMany(queue, 100, 30)
      yield* TestClock.adjust("20 millis")
      yield* turn
      expect(size(yield* Fiber.join(next))).toBe(60)
      expect(yield* queue.len).toBe(10)
    }))

  it.scoped("a window of 0 never gathers", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup({ windowMs: 0 })
      yield* addMany(queue, 0, 40)
      expect(size(yield* batcher.next)).toBe(40)
    }))
})

describe("Batcher: one batch in flight", () => {
  it.scoped("the next batch waits for the one in flight, then takes everything queued meanwhile", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* addMany(queue, 0, 1)
      const first = yield* batcher.next
      yield* addMany(queue, 10, 3)
      const second = yield* Effect.fork(batcher.next)
      yield* turn
      yield* TestClock.adjust(OPTIONS.stalledMs - 1)
      yield* turn
      expect(Option.isNone(yield* Fiber.poll(second))).toBe(true)
      yield* Option.getOrThrow(first).landed
      expect(size(yield* Fiber.join(second))).toBe(3)
    }))

  it.scoped("a batch in flight for stalledMs no longer holds the next one back", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* addMany(queue, 0, 1)
      yield* batcher.next
      yield* addMany(queue, 10, 1)
      const second = yield* Effect.fork(batcher.next)
      yield* turn
      yield* TestClock.adjust(OPTIONS.stalledMs - 1)
      yield* turn
      expect(Option.isNone(yield* Fiber.poll(second))).toBe(true)
      yield* TestClock.adjust(1)
      expect(size(yield* Fiber.join(second))).toBe(1)
    }))

  it.scoped("once the queue shuts down, next is none", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      const next = yield* Effect.fork(batcher.next)
      yield* turn
      yield* queue.shutdown
      expect(Option.isNone(yield* Fiber.join(next))).toBe(true)
    }))
})

describe("Batcher: a slow server's batches stall later", () => {
  let key = 1_000
  /** Batches that each take `ms` to land, one after another (each of a key not queued before). */
  const landBatches = (queue: WorkQueue.WorkQueue<number>, batcher: Batcher.Batcher<number>, n: number, ms: number) =>
    Effect.forEach(
      Array.from({ length: n }, (_, i) => i),
      () =>
        Effect.gen(function* () {
          yield* addMany(queue, key++, 1)
          const b = yield* batcher.next
          yield* TestClock.adjust(ms)
          yield* Option.getOrThrow(b).landed
        }),
      { discard: true }
    )

  /** How long a batch in flight holds the next one back. */
  const heldFor = (queue: WorkQueue.WorkQueue<number>, batcher: Batcher.Batcher<number>) =>
    Effect.gen(function* () {
      yield* addMany(queue, 0, 1)
      yield* batcher.next
      yield* addMany(queue, 10, 1)
      const second = yield* Effect.fork(batcher.next)
      let waited = 0
      for (;;) {
        yield* turn
        if (Option.isSome(yield* Fiber.poll(second))) return waited
        yield* TestClock.adjust(10)
        waited += 10
      }
    })

  it.scoped("after batches that took 600 ms, one in flight holds the next back for twice that, not stalledMs", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* landBatches(queue, batcher, 5, 600)
      expect(yield* heldFor(queue, batcher)).toBe(OPTIONS.stalledFactor * 600)
    }))

  it.scoped("the typical time is the median of the last batches: one slow batch among fast ones does not move it", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* landBatches(queue, batcher, 4, 50)
      yield* landBatches(queue, batcher, 1, 5_000)
      yield* landBatches(queue, batcher, 4, 50)
      expect(yield* heldFor(queue, batcher)).toBe(OPTIONS.stalledMs)
    }))

  it.scoped("however slow the batches, a stalled one holds the next back stalledMaxMs at most", () =>
    Effect.gen(function* () {
      const { queue, batcher } = yield* setup()
      yield* landBatches(queue, batcher, 3, 10_000)
      expect(yield* heldFor(queue, batcher)).toBe(OPTIONS.stalledMaxMs)
    }))
})
