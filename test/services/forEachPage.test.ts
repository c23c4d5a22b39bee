import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
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

  it.effect("asks for each page with the previous page's token, after handing that page over", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const env = listOnly((options) => Effect.sync(() => (log.push(`ask ${options.continue ?? "first"}`), threePages(options))))
      const rv = yield* forEachPage(R.Pods, "ns", (items) => Effect.sync(() => void log.push(`page ${items[0]?.metadata.name}`))).pipe(Effect.provide(env))
      expect(log).toEqual(["ask first", "page p1", "ask 2", "page p2", "ask 3", "page p3"])
      expect(rv).toBe("10")
    }))

  it.effect("a page that fails ends the list with its error", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const env = listOnly((options) =>
        options.continue === "2" ? Effect.fail(new KubeError({ reason: "Forbidden", verb: "list", target: "pods", status: 403, detail: "no" })) : Effect.succeed(threePages(options))
      )
      const error = yield* Effect.flip(forEachPage(R.Pods, "ns", (items) => Effect.sync(() => void seen.push(...items.map((o) => o.metadata.name)))).pipe(Effect.provide(env)))
      expect(error).toMatchObject({ reason: "Forbidden" })
      expect(seen).toEqual(["p1"])
    }))
})
