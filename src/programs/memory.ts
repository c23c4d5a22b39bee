/**
 * Gives memory back to the operating system after the bursts that need it: the first list of
 * every pod, pool and reservation, and each sweep. V8 sizes its heap for the peak of the work it
 * last did and keeps the pages afterwards: with 10k pods the heap holds ~70 MiB of live objects
 * but ~140 MiB of pages once the caches are synced (BENCHMARKS.md "RSS"). A full, compacting
 * collection right after such a burst returns the rest; it pauses the process for ~0.1 s
 * (measured with 10k pods), which a burst that took seconds hides.
 *
 * Node exposes that collection only through `gc()`, behind --expose-gc; the flag can be set at
 * run time and the function taken from a fresh context (as Jest's --logHeapUsage does), so no
 * node flag is needed to run the controller. Where that is refused, nothing is reclaimed.
 */
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { Effect } from "effect"

type CollectGarbage = (options?: { readonly type?: "major" | "minor"; readonly execution?: "sync" | "async"; readonly flavor?: "regular" | "last-resort" }) => void

let collector: CollectGarbage | undefined | null = null

const collectGarbage = (): CollectGarbage | undefined => {
  if (collector !== null) return collector
  const exposed = (globalThis as { gc?: CollectGarbage }).gc
  try {
    if (exposed === undefined) v8.setFlagsFromString("--expose-gc")
    collector = exposed ?? (vm.runInNewContext("gc") as CollectGarbage)
  } catch {
    collector = undefined
  }
  return collector
}

const MiB = (bytes: number) => Math.round(bytes / 2 ** 20)

/**
 * A full collection that also shrinks the heap ("last resort": compacts, and releases the pages
 * it empties, instead of keeping them for later allocations), logged with its pause.
 */
export const reclaimMemory = (after: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const gc = collectGarbage()
    if (gc === undefined) return Effect.logDebug("cannot reclaim memory: gc() is not available").pipe(Effect.annotateLogs({ after }))
    const before = process.memoryUsage()
    const started = performance.now()
    gc({ type: "major", execution: "sync", flavor: "last-resort" })
    const pauseMs = Math.round(performance.now() - started)
    const now = process.memoryUsage()
    return Effect.logInfo("returned unused heap memory to the operating system").pipe(
      Effect.annotateLogs({ after, pauseMs, heapMiB: `${MiB(before.heapTotal)} -> ${MiB(now.heapTotal)}`, rssMiB: `${MiB(before.rss)} -> ${MiB(now.rss)}` })
    )
  })
