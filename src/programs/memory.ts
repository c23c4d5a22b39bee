/**
 * Gives memory back to the operating system after the bursts that grow the heap V8 then keeps: the
 * first list of everything, each sweep, a mass deletion (BENCHMARKS.md's Decisions). Needs `gc()`
 * (--expose-gc, which the image's ENTRYPOINT passes); without it nothing is reclaimed.
 */
import { Clock, Duration, Effect, Schedule } from "effect"

type CollectGarbage = (options?: { readonly type?: "major" | "minor"; readonly execution?: "sync" | "async"; readonly flavor?: "regular" | "last-resort" }) => void

const MiB = (bytes: number) => Math.round(bytes / 2 ** 20)

/** A full collection that also shrinks the heap ("last resort": compacts and releases the pages it empties), logged with its pause. */
export const reclaimMemory = (after: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const gc = (globalThis as { gc?: CollectGarbage }).gc
    if (gc === undefined) return Effect.logDebug("cannot reclaim memory: node runs without --expose-gc").pipe(Effect.annotateLogs({ after }))
    const before = process.memoryUsage()
    const started = performance.now()
    gc({ type: "major", execution: "sync", flavor: "last-resort" })
    const pauseMs = Math.round(performance.now() - started)
    const now = process.memoryUsage()
    return Effect.logInfo("returned unused heap memory to the operating system").pipe(
      Effect.annotateLogs({ after, pauseMs, heapMiB: `${MiB(before.heapTotal)} -> ${MiB(now.heapTotal)}`, rssMiB: `${MiB(before.rss)} -> ${MiB(now.rss)}` })
    )
  })

/**
 * After a mass deletion: once this many pods were processed and the loop then stayed idle (queue and
 * Events empty) for RECLAIM_IDLE_MS. Steady churn is left to V8: a collection amid it is a pause.
 */
export const RECLAIM_AFTER_PODS = 100
export const RECLAIM_IDLE_MS = 2_000
/** How often a due reclaim looks for that idle stretch. */
const RECLAIM_CHECK = Duration.millis(500)

/**
 * The deletion loop's reclaim after bursts: it tells of its work (`arrived`, `finished` a batch of this
 * many pods) and runs `monitor` beside it; `busy`: whether anything is queued, in flight or still writing
 * Events. The monitor sleeps until RECLAIM_AFTER_PODS were processed, and only then checks, every
 * RECLAIM_CHECK, for the idle stretch: an idle controller runs no timer for it.
 */
export const makeReclaimMonitor = (busy: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    let lastActivity = 0
    let processed = 0
    const due = yield* Effect.makeLatch(false)
    const touch = Effect.map(Clock.currentTimeMillis, (now) => void (lastActivity = now))
    const idle = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      // A busy check is activity too: a steady stream handled in a few ms per pod looks idle at almost every check.
      if (yield* busy) lastActivity = now
      return now - lastActivity >= RECLAIM_IDLE_MS
    })
    const untilIdle = Effect.repeat(idle, { schedule: Schedule.spaced(RECLAIM_CHECK), until: (done) => done })
    const reclaimOnce = Effect.gen(function* () {
      yield* due.await
      yield* untilIdle
      processed = 0
      yield* due.close
      yield* reclaimMemory("mass deletion")
    })
    return {
      arrived: touch,
      finished: (pods: number) =>
        Effect.zipRight(Effect.suspend(() => ((processed += pods) >= RECLAIM_AFTER_PODS ? due.open : Effect.void)), touch),
      monitor: Effect.forever(reclaimOnce)
    }
  })
