/**
 * Batcher: takes batches of work from a WorkQueue for the deletion loop's workers. Two rules:
 * - Gathering: a batch of at least `gatherFrom` keys means a mass deletion; its worker keeps
 *   adding what arrives for up to `windowMs` while keys keep arriving at `gatherMinRate` per
 *   second or more, so a mass deletion becomes one write per pool instead of many.
 * - One batch in flight: the next batch waits for the one being processed (and takes everything
 *   that queued meanwhile) unless every batch in flight has stalled: been out for `stalledMs`, or
 *   `stalledFactor` times as long as recent batches took (their median) when that is longer (at most
 *   `stalledMaxMs`); then one more starts, so a stalled call holds the others up that long at
 *   most. On a slow API server batches take longer, so they overlap less and grow larger: fewer
 *   writes of each pool, which is what such a server pays for.
 * Like WorkQueue, built per run; not a Context.Tag.
 */
import { Clock, Deferred, Duration, Effect, Option } from "effect"
import type { WorkItem, WorkQueue } from "./WorkQueue.ts"

/** The numbers of the two rules above, but for `windowMs`, the batch window (ControllerConfig's TUNING). BENCHMARKS.md's Decisions table says what set each. */
export const DEFAULT_BATCHING = {
  // Most keys in one batch. One patch per pool carries a batch's entries of that pool; 500 pods keep it far below the API's operation limit.
  maxBatch: 500,
  // Trades a wait before a mass deletion's first write for fewer, larger pool writes.
  gatherFrom: 32,
  // Gathering stops once fewer than gatherMinRate keys per second arrived over the last gatherSpanMs: trades
  // gathering a slow stream (which would only delay it) against cutting a burst short.
  gatherMinRate: 100,
  gatherSpanMs: 200,
  // How often gathering looks at the queue.
  gatherPollMs: 20,
  // Trade the concurrency a slow API server sees against how long one stalled call delays the rest.
  stalledMs: 250,
  stalledFactor: 2,
  stalledMaxMs: 2_000
}

/** `windowMs`: how long gathering may go on (0: never gather). */
export type BatchingOptions = Readonly<typeof DEFAULT_BATCHING & { readonly windowMs: number }>

/** How many landed batches the typical time of a batch is taken from. */
const RECENT_BATCHES = 9

/** A batch taken: its items, and the effect that marks it no longer in flight (once freed). */
export interface Batch<V> {
  readonly items: ReadonlyArray<WorkItem<V>>
  readonly landed: Effect.Effect<void>
}

export interface Batcher<V> {
  /** The next batch, once it may start; none once the queue is shut down. One caller gathers at a time. */
  readonly next: Effect.Effect<Option.Option<Batch<V>>>
}

/** Batches in flight: `turn` waits until none is, or each has stalled (see above). */
const makeFlight = (o: Pick<BatchingOptions, "stalledMs" | "stalledFactor" | "stalledMaxMs">) =>
  Effect.gen(function* () {
    const started = new Map<number, number>()
    // How long the last batches took, oldest first.
    const took: Array<number> = []
    let next = 0
    let changed = yield* Deferred.make<void>()
    const begin = Effect.map(Clock.currentTimeMillis, (now) => {
      const token = next++
      started.set(token, now)
      return token
    })
    const end = (token: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const at = started.get(token)
        started.delete(token)
        if (at !== undefined) {
          took.push(now - at)
          if (took.length > RECENT_BATCHES) took.shift()
        }
        const done = changed
        return Effect.flatMap(Deferred.make<void>(), (fresh) => {
          changed = fresh
          return Deferred.succeed(done, undefined)
        })
      })
    const stalledAfter = () => {
      if (took.length === 0) return o.stalledMs
      const sorted = [...took].sort((a, b) => a - b)
      // The lower median: of an even number, the faster middle one.
      const typical = sorted[Math.floor((sorted.length - 1) / 2)] ?? 0
      return Math.min(o.stalledMaxMs, Math.max(o.stalledMs, o.stalledFactor * typical))
    }
    const turn = Effect.gen(function* () {
      for (;;) {
        // Taken before the check: a batch ending after it completes this one, and the loop looks again.
        const signal = changed
        if (started.size === 0) return
        const now = yield* Clock.currentTimeMillis
        let youngest = 0
        for (const at of started.values()) youngest = Math.max(youngest, at)
        const wait = youngest + stalledAfter() - now
        if (wait <= 0) return
        yield* Effect.race(Deferred.await(signal), Effect.sleep(Duration.millis(wait)))
      }
    })
    return { begin, end, turn }
  })

/** The next batch, topped up while a mass deletion keeps arriving (see above). */
const takeGathered = <V>(queue: WorkQueue<V>, o: BatchingOptions) =>
  Effect.gen(function* () {
    const first = yield* queue.takeBatch(o.maxBatch)
    if (Option.isNone(first) || first.value.length < o.gatherFrom || first.value.length >= o.maxBatch || o.windowMs <= 0) return first
    const start = yield* Clock.currentTimeMillis
    let seen = yield* queue.len
    // Arrivals are counted per span.
    let spanStart = start
    let spanFrom = seen
    for (;;) {
      const now = yield* Clock.currentTimeMillis
      if (now - start >= o.windowMs || first.value.length + seen >= o.maxBatch) break
      if (now - spanStart >= o.gatherSpanMs) {
        if (seen - spanFrom < (o.gatherMinRate * (now - spanStart)) / 1000) break
        spanStart = now
        spanFrom = seen
      }
      yield* Effect.sleep(Duration.millis(Math.min(o.gatherPollMs, start + o.windowMs - now)))
      seen = yield* queue.len
    }
    if (seen === 0) return first
    const more = yield* queue.takeBatch(o.maxBatch - first.value.length)
    return Option.some([...first.value, ...Option.getOrElse(more, () => [])])
  })

/** A batcher over the queue. */
export const make = <V>(queue: WorkQueue<V>, options: BatchingOptions): Effect.Effect<Batcher<V>> =>
  Effect.gen(function* () {
    // One caller gathers at a time, so a gathering batch is not taken from it piecemeal.
    const gathering = yield* Effect.makeSemaphore(1)
    const flight = yield* makeFlight(options)
    const next = gathering.withPermits(1)(
      Effect.gen(function* () {
        yield* flight.turn
        const items = yield* takeGathered(queue, options)
        if (Option.isNone(items)) return Option.none()
        const token = yield* flight.begin
        return Option.some({ items: items.value, landed: flight.end(token) })
      })
    )
    return { next }
  })
