/**
 * Gives memory back to the operating system after the bursts that grow the heap V8 then keeps: the
 * first list of everything, each sweep, a mass deletion (BENCHMARKS.md's Decisions). Needs `gc()`
 * (--expose-gc, which the image's ENTRYPOINT passes); without it nothing is reclaimed.
 */
import { Clock, Effect, Schedule } from "effect"

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

/** How the deletion loop tells the reclaim monitor about its work. */
export interface LoopActivity {
  /** A deletion arrived. */
  readonly arrived: Effect.Effect<void>
  /** A batch of this many pods was processed. */
  readonly finished: (pods: number) => Effect.Effect<void>
  /** Whether anything is queued, in flight or still writing Events; set by the loop while it runs. */
  readonly setBusy: (busy: Effect.Effect<boolean>) => Effect.Effect<void>
}

/** The activity the loop reports, and the monitor that reclaims after bursts (run it beside the loop). */
export const makeReclaimMonitor = Effect.sync(() => {
  let lastActivity = 0
  let processed = 0
  let busy: Effect.Effect<boolean> = Effect.succeed(false)
  const touch = Effect.map(Clock.currentTimeMillis, (now) => void (lastActivity = now))
  const activity: LoopActivity = {
    arrived: touch,
    finished: (pods) => Effect.zipRight(Effect.sync(() => void (processed += pods)), touch),
    setBusy: (probe) => Effect.sync(() => void (busy = probe))
  }
  const check = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    // A busy check is activity too: a steady stream handled in a few ms per pod looks idle at almost every check.
    if (yield* busy) lastActivity = now
    if (now - lastActivity < RECLAIM_IDLE_MS || processed < RECLAIM_AFTER_PODS) return
    processed = 0
    yield* reclaimMemory("mass deletion")
  })
  return { activity, monitor: Effect.repeat(check, Schedule.spaced("500 millis")) }
})
