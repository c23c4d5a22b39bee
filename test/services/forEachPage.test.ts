import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Layer } from "effect"
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
/** Pages "1", "2", "3" of one item each, chained by continue tokens. */
const threePages = (options: ListOptions): ListResult => {
  const n = options.continue === undefined ? 1 : Number(options.continue)
  return { items: [item(`p${n}`)], resourceVersion: "10", continue: n < 3 ? String(n + 1) : undefined }
}

describe("forEachPage", () => {
  it.live("asks for the next page while the current one is handed on, and hands pages on in order", () =>
    Effect.gen(function* () {
      const asked: Array<string> = []
      const seen: Array<string> = []
      const secondAsked = yield* Deferred.make<void>()
      const env = listOnly((options) =>
        Effect.sync(() => {
          asked.push(options.continue ?? "first")
          return threePages(options)
        }).pipe(Effect.tap(() => (options.continue === "2" ? Deferred.succeed(secondAsked, undefined) : Effect.void)))
      )
      const version = yield* forEachPage(R.Pods, "ns", (items) =>
        Effect.gen(function* () {
          // The first page is held until the second was asked for: that request must not wait for it.
          if (items[0]?.metadata.name === "p1") yield* Deferred.await(secondAsked).pipe(Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => "page 2 was not asked for while page 1 was handled" }))
          seen.push(...items.map((o) => o.metadata.name))
        })
      ).pipe(Effect.provide(env))
      expect(version).toBe("10")
      expect(asked).toEqual(["first", "2", "3"])
      expect(seen).toEqual(["p1", "p2", "p3"])
    }))

  it.effect("a failing page handler ends the list with its error and stops the page in flight", () =>
    Effect.gen(function* () {
      const interrupted = yield* Deferred.make<void>()
      const env = listOnly((options) =>
        options.continue === undefined
          ? Effect.succeed(threePages(options))
          : // The second page never comes; it is interrupted once the handler fails.
            Effect.onInterrupt(Effect.never, () => Deferred.succeed(interrupted, undefined))
      )
      const out = yield* Effect.either(forEachPage(R.Pods, "ns", () => Effect.fail("handler failed" as const)).pipe(Effect.provide(env)))
      expect(Either.isLeft(out) && out.left).toBe("handler failed")
      expect(yield* Deferred.isDone(interrupted)).toBe(true)
    }))

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
})
