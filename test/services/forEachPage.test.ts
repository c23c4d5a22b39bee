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
})
