/**
 * The release loop: deleted pods and pods that will never run again (triggers.ts) → keyed work
 * queue → batches (Batcher) → workers that free what they held (free-pods.ts) → forget, a
 * scheduled retry, or a visible give-up. Runs for one leadership term; when it ends (lost lease or
 * SIGTERM) it stops taking work and lets in-flight work finish.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { REASON_GC_FAILED, gcFailedMessage, podObject } from "../domain/events.ts"
import { podRef, splitPodRef } from "../domain/pod.ts"
import { type Outcome, nextStep } from "../domain/release.ts"
import { backoff } from "../services/backoff.ts"
import * as Batcher from "../services/Batcher.ts"
import { Caches } from "../services/Caches.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { EventRecorder } from "../services/EventRecorder.ts"
import { Metrics } from "../services/Metrics.ts"
import * as WorkQueue from "../services/WorkQueue.ts"
import { makeReclaimMonitor } from "./memory.ts"
import { type Candidate, type PodResult, freeBatch } from "./free-pods.ts"
import { feed, podrefOfKey } from "./triggers.ts"

type Queue = WorkQueue.WorkQueue<Candidate>

/**
 * When a deleted pod is looked at again for the networks where the (lagging) caches showed none of its
 * entries: longer than an informer's resume backoff after an outage (≤ 5 s) plus its catching up.
 */
export const LOOK_AGAIN_AFTER = Duration.seconds(30)

const what = (c: Candidate) => (c.claim === "Deleted" ? "deleted pod" : "pod that will never run again")

const logOutcome = (c: Candidate, outcome: Outcome) => {
  const ref = podRef(c.pod)
  if ((outcome._tag === "Freed" || outcome._tag === "PartlyFreed") && outcome.freed.length > 0) {
    return Effect.logInfo(`freed addresses of ${what(c)}`).pipe(
      Effect.annotateLogs({ pod: ref, uid: c.pod.uid, ips: outcome.freed.map((f) => f.ip).join(","), reservations: outcome.reservations, ...(c.claim === "Deleted" ? {} : { why: c.reason }) })
    )
  }
  if (outcome._tag === "Kept") return Effect.logInfo(`kept addresses of ${what(c)}`).pipe(Effect.annotateLogs({ pod: ref, why: outcome.why }))
  return Effect.void
}

/** What the queue does with one pod after its outcome (nextStep): forget, look again, retry later, or give up visibly. */
const settle = (queue: Queue, key: string, candidate: Candidate, result: PodResult, lookAgainAfter: Duration.Duration) =>
  Effect.gen(function* () {
    const metrics = yield* Metrics
    const { retryAttempts } = yield* ControllerConfig
    const { outcome } = result
    const pod = candidate.pod
    yield* logOutcome(candidate, outcome)
    const unseen = candidate.lookingAgain !== true && result.unseen.length > 0
    const step = nextStep(outcome, (yield* queue.numRequeues(key)) + 1, retryAttempts, unseen)
    if (step._tag === "Forget") return yield* queue.forget(key)
    if (step._tag === "LookAgain") {
      yield* queue.forget(key)
      yield* Effect.logDebug(`looking again at ${what(candidate)} later: the caches showed none of its entries on some networks`).pipe(
        Effect.annotateLogs({ pod: podRef(pod), uid: pod.uid, networks: result.unseen.join(","), after: Duration.format(lookAgainAfter) })
      )
      return yield* queue.addAfter(key, { ...candidate, lookingAgain: true }, lookAgainAfter)
    }
    if (step._tag === "Requeue" && (yield* queue.addRateLimited(key, candidate))) {
      yield* metrics.retry()
      return yield* Effect.logWarning("freeing failed, will retry").pipe(
        Effect.annotateLogs({ pod: podRef(pod), attempt: yield* queue.numRequeues(key), error: step.error.message })
      )
    }
    yield* queue.forget(key)
    if (step._tag === "Drop") {
      // Bad input: a Warning naming the object was recorded; retrying cannot help.
      yield* metrics.failure(step.error.reason)
      return yield* Effect.logWarning(`cannot free the addresses of ${what(candidate)}`).pipe(Effect.annotateLogs({ pod: podRef(pod), reason: step.error.reason, error: step.error.message }))
    }
    yield* Effect.logError(`giving up on ${what(candidate)}: retries exhausted`).pipe(
      Effect.annotateLogs({ pod: podRef(pod), uid: pod.uid, reason: step.error.reason, error: step.error.message })
    )
    yield* metrics.failure("RetriesExhausted")
    yield* (yield* EventRecorder).record(podObject(pod), "Warning", REASON_GC_FAILED, gcFailedMessage(pod.namespace, pod.name))
  })

/**
 * Candidates rule 0 kept addresses of, by the pod they were kept for: queued again (`wake`) when that
 * pod comes through the loop (else nothing would look at them before the next sweep). `gone`: the
 * pods kept for that the cache no longer holds, which may have come through before the wait began.
 */
const makeWaiting = (queue: Queue, caches: Caches["Type"]) => {
  const byClaimant = new Map<string, Map<string, Candidate>>()
  return {
    wait: (key: string, candidate: Candidate, claimants: ReadonlyArray<string>) => {
      for (const c of claimants) byClaimant.set(c, (byClaimant.get(c) ?? new Map()).set(key, candidate))
    },
    gone: (podrefs: ReadonlyArray<string>) => podrefs.filter((ref) => Option.isNone(caches.pods.get(ref))),
    wake: (podrefs: ReadonlyArray<string>) => {
      const woken = [...new Set(podrefs)].flatMap((ref) => {
        const waiting = byClaimant.get(ref) ?? []
        byClaimant.delete(ref)
        return [...waiting].map(([key, candidate]) => ({ key, candidate, for: ref }))
      })
      return Effect.forEach(
        woken,
        (w) =>
          Effect.zipRight(
            Effect.logDebug(`looking again at ${what(w.candidate)}: the pod its addresses were kept for came through`).pipe(Effect.annotateLogs({ pod: podRef(w.candidate.pod), for: w.for })),
            queue.add(w.key, w.candidate)
          ),
        { discard: true }
      )
    }
  }
}
type Waiting = ReturnType<typeof makeWaiting>

/** One batch: free what it held (its Events queued), then settle each pod; the keys are done last. */
const processBatch = (queue: Queue, batch: Batcher.Batch<Candidate>, lookAgainAfter: Duration.Duration, waiting: Waiting) =>
  Effect.gen(function* () {
    const metrics = yield* Metrics
    const start = yield* Clock.currentTimeMillis
    // The queue-wait histogram: each candidate's wait since a trigger queued it (retries and look-agains are not timed).
    for (const { waitingSince } of batch.items) if (waitingSince !== undefined) yield* metrics.queueWait((start - waitingSince) / 1000)
    const results = yield* Effect.ensuring(freeBatch(batch.items.map((i) => i.value)), batch.landed)
    yield* metrics.freeBatchDuration(((yield* Clock.currentTimeMillis) - start) / 1000)
    for (const [i, result] of results.entries()) {
      yield* settle(queue, batch.items[i]!.key, batch.items[i]!.value, result, lookAgainAfter)
      if (result.heldFor.length > 0) waiting.wait(batch.items[i]!.key, batch.items[i]!.value, result.heldFor)
    }
    for (const { key } of batch.items) yield* queue.done(key)
    // A pod kept for may have come through another worker's batch meanwhile: gone from the cache, it wakes its waiters too.
    yield* waiting.wake([...batch.items.map(({ value }) => podRef(value.pod)), ...waiting.gone(results.flatMap((r) => r.heldFor))])
  })

/** Stop intake, then wait (up to the shutdown timeout) for in-flight batches and the Events recorded so far. */
const drain = (queue: Queue) =>
  Effect.gen(function* () {
    const { shutdownTimeout } = yield* ControllerConfig
    const events = yield* EventRecorder
    yield* Effect.logInfo("deletion loop stopping: no new work, waiting for the batches in flight").pipe(
      Effect.annotateLogs({ queued: yield* queue.len, inFlight: yield* queue.inFlight })
    )
    yield* queue.shutdown
    const drained = yield* Effect.zipRight(queue.awaitIdle, events.flush).pipe(Effect.timeoutOption(shutdownTimeout))
    if (Option.isNone(drained)) {
      yield* Effect.logWarning("in-flight work did not finish before the shutdown deadline").pipe(Effect.annotateLogs({ deadline: Duration.format(shutdownTimeout) }))
    }
  })

/** What a running loop tells the rest of the leadership term. */
export interface RunningLoop {
  /** The podrefs whose pods the loop has queued or is working on: a sweep leaves those to it. */
  readonly podrefsHeld: Effect.Effect<ReadonlySet<string>>
  /**
   * What a sweep kept for another pod (rule 0), by the podref it names: looked at again as a
   * deletion once one of the pods it was kept for comes through the loop, as the loop's own are.
   */
  readonly keptFor: (held: ReadonlyArray<{ readonly podref: string; readonly claimants: ReadonlyArray<string> }>) => Effect.Effect<void>
}

interface DeletionLoopOptions<E, R> {
  /** Runs once the workers are up (the start-up sweep catches what happened before). */
  readonly onSynced?: (loop: RunningLoop) => Effect.Effect<void, E, R>
  /** LOOK_AGAIN_AFTER unless given (tests). */
  readonly lookAgainAfter?: Duration.DurationInput
}

/** One leadership term of the deletion loop; never returns. Subscribed before the caches sync: no deletion of the term is missed. */
export const runDeletionLoop = <E = never, R = never>(options: DeletionLoopOptions<E, R> = {}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const caches = yield* Caches
      const config = yield* ControllerConfig
      const metrics = yield* Metrics
      const lookAgainAfter = Duration.decode(options.lookAgainAfter ?? LOOK_AGAIN_AFTER)
      // Registered first, so it runs last: the end of a shutdown (or of a leadership term) in the log.
      yield* Effect.addFinalizer(() => Effect.logInfo("deletion loop stopped"))
      const queue = yield* WorkQueue.make<Candidate>({ backoff: backoff(config.retryBaseDelay, config.retryMaxDelay, { attempts: config.retryAttempts }) })
      const recorder = yield* EventRecorder
      // The heap given back after a burst of deletions (memory.ts).
      const reclaim = yield* makeReclaimMonitor(Effect.map(Effect.all([queue.len, queue.inFlight, recorder.pending]), ([q, f, e]) => q + f + e > 0))
      yield* Effect.forkScoped(reclaim.monitor)
      yield* feed(queue, reclaim.arrived)
      yield* caches.awaitSynced
      const waiting = makeWaiting(queue, caches)
      const batcher = yield* Batcher.make(queue, { ...Batcher.DEFAULT_BATCHING, windowMs: Duration.toMillis(config.batchWindow) })
      const worker = Effect.gen(function* () {
        for (;;) {
          const batch = yield* batcher.next
          if (Option.isNone(batch)) return
          yield* processBatch(queue, batch.value, lookAgainAfter, waiting)
          yield* reclaim.finished(batch.value.items.length)
        }
      })
      // A worker per batch that may be out at once; the Batcher decides when the next may go.
      for (let i = 0; i < config.concurrentBatches; i++) yield* Effect.forkScoped(worker)
      yield* metrics.queueAtScrape(Effect.all([queue.len, queue.inFlight]))
      // Registered after the workers, so it runs before they are interrupted: stop intake, drain.
      yield* Effect.addFinalizer(() => drain(queue))
      yield* Effect.logInfo("deletion loop started").pipe(Effect.annotateLogs({ concurrentBatches: config.concurrentBatches }))
      const podrefsHeld = Effect.map(queue.keys, (keys) => new Set([...keys].map(podrefOfKey)))
      const keptFor: RunningLoop["keptFor"] = (held) =>
        Effect.suspend(() => {
          for (const h of held) {
            const pod = splitPodRef(h.podref)
            // Its pod is gone (the sweep found it an orphan): uid unknown, the podref index finds what it holds.
            if (pod !== undefined) waiting.wait(`${h.podref}/`, { claim: "Deleted", pod: { ...pod, uid: "" }, foundBy: "sweep" }, h.claimants)
          }
          return waiting.wake(waiting.gone(held.flatMap((h) => h.claimants)))
        })
      yield* options.onSynced?.({ podrefsHeld, keptFor }) ?? Effect.void
      return yield* Effect.never
    })
  )
