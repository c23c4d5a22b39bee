import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Logger } from "effect"
import { reclaimMemory } from "../../src/programs/memory.ts"

describe("reclaimMemory", () => {
  it.effect("shrinks the heap a burst grew, without --expose-gc, and logs the pause", () =>
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
})
