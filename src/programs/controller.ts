/**
 * The deletion-driven loop: pod deletions → keyed work queue → N workers reconciling batches →
 * success, a scheduled retry, or a visible give-up. Runs for one leadership term; when the term
 * ends (lost lease or SIGTERM) it stops taking work and lets in-flight work finish.
 */
import { Clock, Deferred, Duration, Effect, Either, FiberSet, Option, Schedule, Stream } from "effect"
import { type PodProjection, podRef } from "../domain/pod.ts"
import { Caches } from "../services/Caches.ts"
import { ControllerConfig, type ControllerConfigShape } from "../services/ControllerConfig.ts"
import { EventRecorder, REASON_GC_FAILED, gcFailedMessage } from "../services/EventRecorder.ts"
import { Metrics } from "../services/Metrics.ts"
import * as WorkQueue from "../services/WorkQueue.ts"
import { reclaimMemory } from "./memory.ts"
import { type ReconcileError, reconcileBatch } from "./reconcile.ts"

/** Most deleted pods one worker reconciles together (one patch per pool for all of them). */
export const MAX_BATCH = 500

/**
 * A batch this large means a mass deletion: its worker waits up to `batchWindow` and adds what
 * arrived meanwhile (it stops early when the batch is full or deletions stop arriving), while the
 * other workers wait to take theirs. Measured on the real API server (5,000
 * pods over 10 pools, deleted 16 at a time): without it, workers took a batch every few hundred
 * milliseconds and wrote 0.09–0.21 pool patches per freed address, and the extra patches of large
 * pools slowed the API server's own deletes; single deletions (50/s) almost never queue 32.
 */
export const GATHER_FROM = 32

/** Gathering stops early once fewer than GATHER_MIN_RATE deletions per second arrived over this long ... */
export const GATHER_IDLE_MS = 200
/**
 * ... so a steady stream slower than a burst is served batch by batch (the batch in flight takes
 * in what queued meanwhile) instead of waiting the window. Measured on the real API server:
 * single deletions at 50/s after a mass deletion (`SINGLE_AFTER_MASS=5000 node
 * bench/single-profile.ts`): a server stall let 32 queue, the worker then gathered the whole
 * second while the stream went on, and the p99 rose to 2.0-2.8 s. The benchmark's mass deletion
 * arrives at ~190 pods/s.
 */
export const GATHER_MIN_RATE = 100
/** ... checked this often. */
const GATHER_POLL_MS = 20

/**
 * While a batch is being reconciled the next one waits for it, and takes everything that queued
 * meanwhile, unless every batch in flight has been out this long: then one more worker starts
 * (up to `--workers`), so a stalled API call holds up the others for this long at most. Measured
 * on the real API server (single deletions at 50/s, bench/single-profile.ts): four batches at once
 * sent four times the concurrent writes to a server that was already the bottleneck, and its
 * stalls became the p99 (845-954 ms); with this, 387-537 ms over three runs, the mass deletion no
 * slower. 100 ms gave 567-937 ms (BENCHMARKS.md).
 */
export const STALLED_BATCH_MS = 250

/** Batches in flight: `turn` waits until none is, or each has been out for `stalledMs`. */
export const makeFlight = (stalledMs: number) =>
  Effect.gen(function* () {
    const started = new Map<number, number>()
    let next = 0
    let changed = yield* Deferred.make<void>()
    const begin = Effect.map(Clock.currentTimeMillis, (now) => {
      const token = next++
      started.set(token, now)
      return token
    })
    const end = (token: number) =>
      Effect.suspend(() => {
        started.delete(token)
        const done = changed
        return Effect.flatMap(Deferred.make<void>(), (fresh) => {
          changed = fresh
          return Deferred.succeed(done, undefined)
        })
      })
    const turn = Effect.gen(function* () {
      for (;;) {
        // Taken before the check: a batch ending after it completes this one, and the loop looks again.
        const signal = changed
        if (started.size === 0) return
        const now = yield* Clock.currentTimeMillis
        let youngest = 0
        for (const at of started.values()) youngest = Math.max(youngest, at)
        const wait = youngest + stalledMs - now
        if (wait <= 0) return
        yield* Effect.race(Deferred.await(signal), Effect.sleep(Duration.millis(wait)))
      }
    })
    return { begin, end, turn }
  })

/** Batches whose Events may be pending per worker before the worker waits for them. */
export const EVENT_SLOTS_PER_WORKER = 2

/**
 * A mass deletion grows the heap (batches, Events, pool answers) and V8 keeps it: with 10k pods
 * cached, 145 MiB after start-up became 245 MiB once 300 pods were freed, and stayed
 * (bench/rss-probe.ts with PROBE_BURST). Once this many pods were processed and the queue then
 * stayed empty, with no Event left to write, for RECLAIM_IDLE_MS, the heap is given back
 * (memory.ts). Idle means no deletion arrived and no batch finished for that long, and the
 * queue and the Events were empty at every check meanwhile. Steady churn, which never leaves the
 * loop idle that long, is left to V8.
 */
export const RECLAIM_AFTER_PODS = 100
export const RECLAIM_IDLE_MS = 2_000

/** Bounded, jittered exponential backoff between attempts; done after `retryAttempts` attempts. */
export const retrySchedule = (c: Pick<ControllerConfigShape, "retryBaseDelay" | "retryMaxDelay" | "retryAttempts">) =>
  Schedule.exponential(c.retryBaseDelay).pipe(
    Schedule.union(Schedule.spaced(c.retryMaxDelay)),
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(c.retryAttempts - 1))
  )

/** Queue key: one deletion per pod incarnation. */
export const queueKey = (p: PodProjection): string => `${p.namespace}/${p.name}/${p.uid}`

const giveUp = (pod: PodProjection, error: ReconcileError) =>
  Effect.gen(function* () {
    const events = yield* EventRecorder
    const metrics = yield* Metrics
    yield* Effect.logError("giving up on deleted pod: retries exhausted").pipe(
      Effect.annotateLogs({ pod: podRef(pod), uid: pod.uid, reason: error.reason, error: error.message })
    )
    yield* metrics.failure("RetriesExhausted")
    yield* events.record(
      { kind: "Pod", namespace: pod.namespace, name: pod.name, uid: pod.uid },
      "Warning",
      REASON_GC_FAILED,
      gcFailedMessage(pod.namespace, pod.name)
    )
  })

/**
 * One batch. The addresses are free when `reconcileBatch` returns; then its Events are written
 * and what was freed is counted (so `ips_freed_total` moves only once the Events exist).
 * - Nothing else queued: a background fiber in `background` (drained at shutdown) writes them,
 *   and the worker is free at once for the next deletion — a single deletion does not wait
 *   behind the previous one's Events. At most `eventSlots` batches' Events (two per worker) are
 *   pending; beyond that the worker waits, so memory stays bounded.
 * - A backlog: the worker writes them itself. Meanwhile deletions pile up into the next batch,
 *   which is what keeps a mass deletion at one patch per pool per round (measured on the real
 *   API server: handing them off there too shrank batches from ~167 to ~41 pods and quadrupled
 *   the pool writes per freed address).
 */
const processBatch = (
  queue: WorkQueue.WorkQueue<PodProjection>,
  items: ReadonlyArray<WorkQueue.WorkItem<PodProjection>>,
  observedAt: Map<string, number>,
  background: FiberSet.FiberSet,
  eventSlots: Effect.Semaphore,
  /** Runs once the batch is reconciled (before its Events): the batch leaves the flight. */
  reconciled: Effect.Effect<void>
) =>
  Effect.gen(function* () {
    const metrics = yield* Metrics
    const start = yield* Clock.currentTimeMillis
    for (const { key } of items) {
      const at = observedAt.get(key)
      if (at === undefined) continue
      observedAt.delete(key)
      yield* metrics.queueWait((start - at) / 1000)
    }
    const { results, events } = yield* Effect.ensuring(reconcileBatch(items.map((i) => i.value)), reconciled)
    yield* metrics.reconcileDuration(((yield* Clock.currentTimeMillis) - start) / 1000)
    const counts: Array<Effect.Effect<void>> = []
    for (const [i, { pod, result }] of results.entries()) {
      const key = items[i]!.key
      const ref = podRef(pod)
      if (Either.isRight(result)) {
        const outcome = result.right
        // A retry may delete only the reservations an earlier attempt left: counted on their own.
        if (outcome._tag === "Freed" && outcome.reservations > 0) counts.push(metrics.reservationsDeleted("deletion", outcome.reservations))
        if (outcome._tag === "Freed" && outcome.freed.length > 0) {
          counts.push(metrics.ipsFreed("deletion", outcome.freed.length))
          yield* Effect.logInfo("freed addresses of deleted pod").pipe(
            Effect.annotateLogs({ pod: ref, uid: pod.uid, ips: outcome.freed.map((f) => f.ip).join(","), reservations: outcome.reservations })
          )
        } else if (outcome._tag === "Kept") {
          yield* Effect.logInfo("kept addresses of deleted pod").pipe(Effect.annotateLogs({ pod: ref, why: outcome.why }))
        }
      }
      // Addresses freed but a reservation left (see reconcileBatch): reported above, then handled as its failure.
      const failure = Either.isLeft(result) ? result.left : result.right._tag === "Freed" ? result.right.pending : undefined
      if (failure === undefined) {
        yield* queue.forget(key)
      } else if (failure.retryable) {
        if (yield* queue.addRateLimited(key, pod)) {
          yield* metrics.retry()
          yield* Effect.logWarning("reconcile failed, will retry").pipe(
            Effect.annotateLogs({ pod: ref, attempt: yield* queue.numRequeues(key), error: failure.message })
          )
        } else {
          yield* queue.forget(key)
          yield* giveUp(pod, failure)
        }
      } else {
        // Permanent: a Warning naming the object was recorded; retrying cannot help.
        yield* queue.forget(key)
        yield* metrics.failure(failure.reason)
        yield* Effect.logWarning("cannot reconcile deleted pod").pipe(
          Effect.annotateLogs({ pod: ref, reason: failure.reason, error: failure.message })
        )
      }
    }
    // Handed over before the keys are done: a shutdown waiting for an idle queue then finds the Events in `background`.
    const writeAndCount = Effect.zipRight(events, Effect.all(counts, { discard: true }))
    if ((yield* queue.len) > 0) {
      yield* writeAndCount
    } else {
      yield* eventSlots.take(1)
      yield* FiberSet.run(background, writeAndCount.pipe(Effect.ensuring(eventSlots.release(1))))
    }
    for (const { key } of items) yield* queue.done(key)
  })

/**
 * The next batch. One of at least GATHER_FROM pods is topped up with what arrives until it would
 * be full, `windowMs` passes, or fewer than GATHER_MIN_RATE per second arrived over the last
 * GATHER_IDLE_MS (none at all, or a stream slower than a burst).
 */
const takeGathered = <V>(queue: WorkQueue.WorkQueue<V>, windowMs: number) =>
  Effect.gen(function* () {
    const first = yield* queue.takeBatch(MAX_BATCH)
    if (Option.isNone(first) || first.value.length < GATHER_FROM || first.value.length >= MAX_BATCH || windowMs <= 0) return first
    const start = yield* Clock.currentTimeMillis
    let seen = yield* queue.len
    // Arrivals are counted per span of GATHER_IDLE_MS.
    let spanStart = start
    let spanFrom = seen
    for (;;) {
      const now = yield* Clock.currentTimeMillis
      if (now - start >= windowMs || first.value.length + seen >= MAX_BATCH) break
      if (now - spanStart >= GATHER_IDLE_MS) {
        if (seen - spanFrom < (GATHER_MIN_RATE * (now - spanStart)) / 1000) break
        spanStart = now
        spanFrom = seen
      }
      yield* Effect.sleep(Duration.millis(Math.min(GATHER_POLL_MS, start + windowMs - now)))
      seen = yield* queue.len
    }
    if (seen === 0) return first
    const more = yield* queue.takeBatch(MAX_BATCH - first.value.length)
    return Option.some([...first.value, ...Option.getOrElse(more, () => [])])
  })

/**
 * One leadership term of the deletion loop; never returns. Subscribes to deletions before waiting
 * for the caches, so nothing deleted after the term starts is missed; `onSynced` runs once the
 * workers are up (the start-up sweep catches what happened before).
 */
export const runDeletionLoop = <E, R>(onSynced: Effect.Effect<void, E, R> = Effect.void) =>
  Effect.scoped(
    Effect.gen(function* () {
      const caches = yield* Caches
      const config = yield* ControllerConfig
      const metrics = yield* Metrics
      // Registered first, so it runs last: the end of a shutdown (or of a leadership term) in the log.
      yield* Effect.addFinalizer(() => Effect.logInfo("deletion loop stopped"))
      const deletions = yield* caches.podDeletions
      const queue = yield* WorkQueue.make<PodProjection>({ backoff: retrySchedule(config) })
      // Events of freed addresses being written; before the workers, so it outlives them at shutdown.
      const background = yield* FiberSet.make()
      const eventSlots = yield* Effect.makeSemaphore(EVENT_SLOTS_PER_WORKER * config.workers)
      // When each deletion arrived, until a worker first takes it: the queue-wait histogram.
      const observedAt = new Map<string, number>()
      // When a deletion last arrived, a batch last finished or a check found work (ms): the idle time before a reclaim.
      let lastActivity = 0
      yield* Effect.forkScoped(
        Stream.runForEach(deletions, (pod) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            lastActivity = now
            const key = queueKey(pod)
            if (!observedAt.has(key)) observedAt.set(key, now)
            return queue.add(key, pod)
          })
        )
      )
      yield* caches.awaitSynced
      // One worker gathers a batch at a time, so a gathering worker's batch is not taken from it
      // piecemeal; it takes one when its turn comes (STALLED_BATCH_MS) and marks it in flight.
      const gathering = yield* Effect.makeSemaphore(1)
      const flight = yield* makeFlight(STALLED_BATCH_MS)
      const gather = gathering.withPermits(1)(
        Effect.gen(function* () {
          yield* flight.turn
          const batch = yield* takeGathered(queue, Duration.toMillis(config.batchWindow))
          return Option.isNone(batch) ? Option.none() : Option.some({ items: batch.value, token: yield* flight.begin })
        })
      )
      let processedSinceReclaim = 0
      const worker = Effect.gen(function* () {
        for (;;) {
          const taken = yield* gather
          if (Option.isNone(taken)) return
          const { items, token } = taken.value
          yield* processBatch(queue, items, observedAt, background, eventSlots, flight.end(token))
          processedSinceReclaim += items.length
          lastActivity = yield* Clock.currentTimeMillis
        }
      })
      for (let i = 0; i < config.workers; i++) yield* Effect.forkScoped(worker)
      yield* Effect.forkScoped(
        Effect.repeat(
          Effect.flatMap(Effect.all([queue.len, queue.inFlight]), ([d, f]) => metrics.queue(d, f)),
          Schedule.spaced("1 second")
        )
      )
      yield* Effect.forkScoped(
        Effect.repeat(
          Effect.gen(function* () {
            // Background Events count: at the default QPS those of a mass deletion take a minute.
            const busy = (yield* queue.len) + (yield* queue.inFlight) + (yield* FiberSet.size(background)) > 0
            const now = yield* Clock.currentTimeMillis
            // A busy check is activity too. The checks alone are not enough: a steady stream handled
            // in a few ms per pod looks idle at almost every one, and collecting (0.1-0.2 s) in the
            // middle of it is a pause.
            if (busy) lastActivity = now
            if (busy || now - lastActivity < RECLAIM_IDLE_MS || processedSinceReclaim < RECLAIM_AFTER_PODS) return
            processedSinceReclaim = 0
            yield* reclaimMemory("mass deletion")
          }),
          Schedule.spaced("500 millis")
        )
      )
      // Registered after the workers, so it runs before they are interrupted: stop intake, drain.
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          yield* Effect.logInfo("deletion loop stopping: no new work, waiting for in-flight reconciles").pipe(
            Effect.annotateLogs({ queued: yield* queue.len, inFlight: yield* queue.inFlight })
          )
          yield* queue.shutdown
          const drained = yield* Effect.zipRight(queue.awaitIdle, FiberSet.awaitEmpty(background)).pipe(Effect.timeoutOption(config.shutdownTimeout))
          if (Option.isNone(drained)) {
            yield* Effect.logWarning("in-flight work did not finish before the shutdown deadline").pipe(
              Effect.annotateLogs({ deadline: Duration.format(config.shutdownTimeout) })
            )
          }
        })
      )
      yield* Effect.logInfo("deletion loop started").pipe(Effect.annotateLogs({ workers: config.workers }))
      yield* onSynced
      return yield* Effect.never
    })
  )
