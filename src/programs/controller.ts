/**
 * The deletion-driven loop: pod deletions → keyed work queue → N workers reconciling batches →
 * success, a scheduled retry, or a visible give-up. Runs for one leadership term; when the term
 * ends (lost lease or SIGTERM) it stops taking work and lets in-flight work finish.
 */
import { Clock, Duration, Effect, Either, Option, Schedule, Stream } from "effect"
import { type PodProjection, podRef } from "../domain/pod.ts"
import { Caches } from "../services/Caches.ts"
import { ControllerConfig, type ControllerConfigShape } from "../services/ControllerConfig.ts"
import { EventRecorder, REASON_GC_FAILED, gcFailedMessage } from "../services/EventRecorder.ts"
import { Metrics } from "../services/Metrics.ts"
import * as WorkQueue from "../services/WorkQueue.ts"
import { type ReconcileError, reconcilePods } from "./reconcile.ts"

/** Most deleted pods one worker reconciles together (one patch per pool for all of them). */
export const MAX_BATCH = 500

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

const processBatch = (queue: WorkQueue.WorkQueue<PodProjection>, items: ReadonlyArray<WorkQueue.WorkItem<PodProjection>>) =>
  Effect.gen(function* () {
    const metrics = yield* Metrics
    const start = yield* Clock.currentTimeMillis
    const results = yield* reconcilePods(items.map((i) => i.value))
    yield* metrics.reconcileDuration(((yield* Clock.currentTimeMillis) - start) / 1000)
    for (const [i, { pod, result }] of results.entries()) {
      const key = items[i]!.key
      const ref = podRef(pod)
      if (Either.isRight(result)) {
        yield* queue.forget(key)
        const outcome = result.right
        if (outcome._tag === "Freed" && outcome.freed.length > 0) {
          yield* metrics.ipsFreed("deletion", outcome.freed.length)
          yield* metrics.reservationsDeleted("deletion", outcome.reservations)
          yield* Effect.logInfo("freed addresses of deleted pod").pipe(
            Effect.annotateLogs({ pod: ref, uid: pod.uid, ips: outcome.freed.map((f) => f.ip).join(","), reservations: outcome.reservations })
          )
        } else if (outcome._tag === "Kept") {
          yield* Effect.logInfo("kept addresses of deleted pod").pipe(Effect.annotateLogs({ pod: ref, why: outcome.why }))
        }
      } else if (result.left.retryable) {
        if (yield* queue.addRateLimited(key, pod)) {
          yield* metrics.retry()
          yield* Effect.logWarning("reconcile failed, will retry").pipe(
            Effect.annotateLogs({ pod: ref, attempt: yield* queue.numRequeues(key), error: result.left.message })
          )
        } else {
          yield* queue.forget(key)
          yield* giveUp(pod, result.left)
        }
      } else {
        // Permanent: a Warning naming the object was recorded; retrying cannot help.
        yield* queue.forget(key)
        yield* metrics.failure(result.left.reason)
        yield* Effect.logWarning("cannot reconcile deleted pod").pipe(
          Effect.annotateLogs({ pod: ref, reason: result.left.reason, error: result.left.message })
        )
      }
      yield* queue.done(key)
    }
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
      yield* Effect.forkScoped(Stream.runForEach(deletions, (pod) => queue.add(queueKey(pod), pod)))
      yield* caches.awaitSynced
      const worker = Effect.gen(function* () {
        for (;;) {
          const batch = yield* queue.takeBatch(MAX_BATCH)
          if (Option.isNone(batch)) return
          yield* processBatch(queue, batch.value)
        }
      })
      for (let i = 0; i < config.workers; i++) yield* Effect.forkScoped(worker)
      yield* Effect.forkScoped(
        Effect.repeat(
          Effect.flatMap(Effect.all([queue.len, queue.inFlight]), ([d, f]) => metrics.queue(d, f)),
          Schedule.spaced("1 second")
        )
      )
      // Registered after the workers, so it runs before they are interrupted: stop intake, drain.
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          yield* Effect.logInfo("deletion loop stopping: no new work, waiting for in-flight reconciles").pipe(
            Effect.annotateLogs({ queued: yield* queue.len, inFlight: yield* queue.inFlight })
          )
          yield* queue.shutdown
          const drained = yield* queue.awaitIdle.pipe(Effect.timeoutOption(config.shutdownTimeout))
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
