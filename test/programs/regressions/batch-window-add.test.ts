/**
 * Found by the race test (an allocator writing the pool while 500 pods were deleted), failing now
 * and then with "pool … stayed contended": a batch release freed a hundred entries in one patch and
 * only then deleted their reservations one by one. In between, the CNI plugin found the lowest free
 * addresses each still reserved by a dead pod and, like upstream, spent one of its 100 retries on
 * each. Reservations now go first, while the pool still holds the entries: an ADD at any moment of
 * a batch reconcile gets an address at once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { type RunningPod, deletePod, startPod } from "../../../src/testing/cni-plugin.ts"
import { freePods } from "../../support/free-pods.ts"
import type { PodProjection } from "../../../src/domain/pod.ts"
import { on } from "../../support/controller.ts"
import { ApiHooks, type MemoryEnv, memoryWithHooks } from "../../support/hooks.ts"
import { cachesCaughtUp, createNad, podrefsOf, projectionOf, reservationNames } from "../../support/world.ts"

describe("regression: a CNI ADD during a batch reconcile", () => {
  it.live("succeeds between any two of the controller's writes, even with 120 addresses in flight", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      yield* createNad("default", "net1", { range: "10.212.0.0/24" })
      const leaked: Array<PodProjection> = []
      const pods: Array<RunningPod> = []
      for (let i = 0; i < 120; i++) {
        pods.push(yield* startPod("default", `p-${i}`, [on("net1")]))
        leaked.push(yield* projectionOf("default", `p-${i}`))
      }
      for (const p of pods) yield* deletePod(p)
      yield* cachesCaughtUp

      // Before the controller's 1st and 60th reservation delete and before its pool write, a new pod starts.
      const env = yield* Effect.context<MemoryEnv>()
      const started: Array<Either.Either<RunningPod, unknown>> = []
      let inHook = false
      let reservationDeletes = 0
      hooks.before = (c) =>
        Effect.suspend(() => {
          if (inHook) return Effect.void
          const isResDelete = c.verb === "delete" && c.resource === "overlappingrangeipreservations"
          if (isResDelete) reservationDeletes++
          const now = (isResDelete && (reservationDeletes === 1 || reservationDeletes === 60)) || (c.verb === "patch" && c.resource === "ippools")
          if (!now) return Effect.void
          inHook = true
          return startPod("default", `newcomer-${started.length}`, [on("net1")]).pipe(
            Effect.either,
            Effect.tap((r) => Effect.sync(() => void started.push(r))),
            Effect.ensuring(Effect.sync(() => void (inHook = false))),
            Effect.provide(env),
            Effect.asVoid
          )
        })
      const results = yield* freePods(leaked)
      hooks.clear()

      expect(started).toHaveLength(3)
      for (const r of started) expect(Either.isRight(r), JSON.stringify(r)).toBe(true)
      expect(results.every((r) => r.outcome._tag === "Freed" && r.outcome.freed.length === 1)).toBe(true)
      expect(yield* podrefsOf("10.212.0.0-24")).toEqual(["default/newcomer-0", "default/newcomer-1", "default/newcomer-2"])
      const ips = started.flatMap((r) => (Either.isRight(r) ? r.right.ips[0]!.ips : []))
      expect(yield* reservationNames).toEqual([...ips].sort())
    }).pipe(Effect.provide(memoryWithHooks())))
})
