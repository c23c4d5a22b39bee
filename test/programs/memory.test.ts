import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, LogLevel, Logger, TestClock } from "effect"
import { makeReclaimMonitor, RECLAIM_AFTER_PODS, RECLAIM_IDLE_MS, reclaimMemory } from "../../src/programs/memory.ts"

describe("reclaimMemory", () => {
  it.effect("shrinks the heap a burst grew and logs the pause (node runs with --expose-gc, as in the image)", () =>
    Effect.gen(function* () {
      const lines: Array<Record<string, unknown>> = []
      const logger = Logger.make(({ message, annotations }) => {
        lines.push({ message: String(message), ...Object.fromEntries(HashMap.toEntries(annotations)) })
      })
      // A burst: ~100 MB of objects, live until the burst ends.
      let burst: Array<{ readonly i: number; readonly s: string }> | undefined = Array.from({ length: 1_000_000 }, (_, i) => ({ i, s: `entry-${i}` }))
      expect(burst.length).toBe(1_000_000)
      burst = undefined
      const before = process.memoryUsage().heapTotal
      yield* reclaimMemory("test burst").pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      const after = process.memoryUsage().heapTotal
      expect(burst).toBeUndefined()
      expect(before - after).toBeGreaterThan(30 * 2 ** 20)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatchObject({ message: "returned unused heap memory to the operating system", after: "test burst" })
      expect(typeof lines[0]!["pauseMs"]).toBe("number")
    })
  )

  it.effect("without --expose-gc reclaims nothing and says so at debug", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => void lines.push(`${logLevel.label} ${String(message)}`))
      const global = globalThis as { gc?: unknown }
      const gc = global.gc
      global.gc = undefined
      yield* reclaimMemory("test").pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
        Logger.withMinimumLogLevel(LogLevel.Debug),
        Effect.ensuring(Effect.sync(() => void (global.gc = gc)))
      )
      expect(lines).toEqual(["DEBUG cannot reclaim memory: node runs without --expose-gc"])
    })
  )
})

describe("reclaim monitor", () => {
  it.scoped("looks at nothing until a burst is due, then for the idle stretch, then sleeps again", () =>
    Effect.gen(function* () {
      let looks = 0
      const monitor = yield* makeReclaimMonitor(Effect.sync(() => (looks++, false)))
      yield* Effect.forkScoped(monitor.monitor)
      yield* TestClock.adjust("1 minute")
      expect(looks).toBe(0)
      yield* monitor.finished(RECLAIM_AFTER_PODS - 1)
      yield* TestClock.adjust("1 minute")
      expect(looks).toBe(0)
      yield* monitor.finished(1)
      yield* TestClock.adjust(RECLAIM_IDLE_MS * 2)
      const duringTheBurst = looks
      expect(duringTheBurst).toBeGreaterThan(0)
      yield* TestClock.adjust("1 minute")
      expect(looks).toBe(duringTheBurst)
    })
  )
})
