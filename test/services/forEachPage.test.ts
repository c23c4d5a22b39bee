import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Layer } from "effect"
import { KubeApi, type KubeApiShape, type ListOptions, type ListResult, forEachPage } from "../../src/services/KubeApi.ts"
import { KubeError } from "../../src/services/KubeError.ts"
import * as R from "../../src/services/resources.ts"

/** A KubeApi whose only call is `list`, answered by `answer` (the rest die). */
const listOnly = (answer: (options: ListOptions) => Effect.Effect<ListResult, KubeError>) =>
  Layer.succeed(KubeApi, {
    get: () => Effect.die("get"),
    list: (_r, _ns, options = {}) => answer(options),
    create: () => Effect.die("create"),
    replace: () => Effect.die("replace"),
    patch: () => Effect.die("patch"),
    delete: () => Effect.die("delete"),
    watch: () => Effect.die("watch")
  } satisfies KubeApiShape)

const item = (name: string) => ({ metadata: { name, namespace: "ns" } })
/** Enough turns of the scheduler for every fiber that can run to reach its next wait. */
const settle = Effect.repeatN(Effect.yieldNow(), 100)

/** Pages "1", "2", "3" of one item each, chained by continue tokens. */
const threePages = (options: ListOptions): ListResult => {
  const n = options.continue === undefined ? 1 : Number(options.continue)
  return { items: [item(`p${n}`)], resourceVersion: "10", continue: n < 3 ? String(n + 1) : undefined }
}

describe("forEachPage", () => {
  it.effect("an expired continue token restarts the list once from the beginning", () =>
    Effect.gen(function* () {
      let expired = false
      let starts = 0
      const seen: Array<string> = []
      const env = listOnly((options) => {
        if (options.continue === "3" && !expired) {
          expired = true
          return Effect.fail(new KubeError({ reason: "Gone", verb: "list", target: "pods", status: 410, detail: "continue token expired" }))
        }
        return Effect.succeed(threePages(options))
      })
      yield* forEachPage(R.Pods, "ns", (items) => Effect.sync(() => void seen.push(...items.map((o) => o.metadata.name))), {
        onStart: () => {
          starts++
          seen.length = 0
        }
      }).pipe(Effect.provide(env))
      expect(starts).toBe(2)
      expect(seen).toEqual(["p1", "p2", "p3"])
    }))

  it.effect("asks for the next page as soon as this one's continue token is known, while this one is still coming; one page ahead at most", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      // Each page tells its token at once and arrives only when the test lets it.
      const arrive = new Map<number, Deferred.Deferred<void>>()
      for (const n of [1, 2, 3]) arrive.set(n, yield* Deferred.make<void>())
      const env = listOnly((options) => {
        const page = threePages(options)
        const n = Number(page.items[0]?.metadata.name.slice(1))
        log.push(`ask ${n}`)
        options.onContinue?.(page.continue)
        return Effect.as(Deferred.await(arrive.get(n)!), page)
      })
      const run = yield* Effect.fork(forEachPage(R.Pods, "ns", (items) => Effect.sync(() => void log.push(`page ${items[0]?.metadata.name}`))).pipe(Effect.provide(env)))
      yield* settle
      // Page 2 is asked for before page 1 has arrived; page 3 waits until page 1 is handed over.
      expect(log).toEqual(["ask 1", "ask 2"])
      yield* Deferred.succeed(arrive.get(1)!, undefined)
      yield* settle
      expect(log).toEqual(["ask 1", "ask 2", "page p1", "ask 3"])
      yield* Deferred.succeed(arrive.get(3)!, undefined)
      yield* settle
      // Page 3 has arrived, but pages are handed over in order.
      expect(log).toEqual(["ask 1", "ask 2", "page p1", "ask 3"])
      yield* Deferred.succeed(arrive.get(2)!, undefined)
      expect((yield* run.await)._tag).toBe("Success")
      expect(log).toEqual(["ask 1", "ask 2", "page p1", "ask 3", "page p2", "page p3"])
    }))

  it.effect("a token told early that the page itself does not carry is dropped: its request interrupted, the page's own token asked for", () =>
    Effect.gen(function* () {
      const asked: Array<string | undefined> = []
      let interrupted = 0
      const env = listOnly((options) => {
        asked.push(options.continue)
        if (options.continue === "wrong") return Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => void interrupted++)))
        const page = threePages(options)
        // Page 1 misreports its token early.
        options.onContinue?.(options.continue === undefined ? "wrong" : page.continue)
        return Effect.as(Effect.yieldNow(), page)
      })
      const seen: Array<string> = []
      yield* forEachPage(R.Pods, "ns", (items) => Effect.sync(() => void seen.push(...items.map((o) => o.metadata.name)))).pipe(Effect.provide(env))
      expect(seen).toEqual(["p1", "p2", "p3"])
      expect(asked).toEqual([undefined, "wrong", "2", "3"])
      expect(interrupted).toBe(1)
    }))

  it.effect("a page that fails ends the list with its error and interrupts the page asked for ahead", () =>
    Effect.gen(function* () {
      let interrupted = 0
      const env = listOnly((options) => {
        const page = threePages(options)
        options.onContinue?.(page.continue)
        if (options.continue === "2") return Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => void interrupted++)))
        return Effect.zipRight(Effect.yieldNow(), Effect.fail(new KubeError({ reason: "Forbidden", verb: "list", target: "pods", status: 403, detail: "no" })))
      })
      const error = yield* Effect.flip(forEachPage(R.Pods, "ns", () => Effect.void).pipe(Effect.provide(env)))
      expect(error).toMatchObject({ reason: "Forbidden" })
      expect(interrupted).toBe(1)
    }))
})
