/**
 * Found by the interleavings property (scenario [["leak","leak","stay"]]): the controller decided a
 * deleted StatefulSet pod was gone (live re-check), then the pod was re-created under the same name
 * and its idempotent CNI ADD took the same address back — keeping the existing reservation, which
 * has the same podref. The controller then deleted that reservation: the live pod kept its address
 * but lost its overlapping-range reservation, so another range could hand the address out again.
 * Now a reborn pod's re-ADD changes the entry's id, the guarded release skips it, and the
 * reservation is given back once both writes are done (a small batch deletes reservations and
 * patches the pool at once; a large one deletes reservations first).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type RunningPod, deletePod, startPod } from "../../../src/testing/cni-plugin.ts"
import { freePods } from "../../support/free-pods.ts"
import { InMemoryCluster } from "../../../src/testing/InMemoryCluster.ts"
import * as R from "../../../src/services/resources.ts"
import { on } from "../../support/controller.ts"
import { ApiHooks, type MemoryEnv, memoryWithHooks, once } from "../../support/hooks.ts"
import { cachesCaughtUp, createNad, eventsIn, projectionOf } from "../../support/world.ts"

const POOL = "10.211.0.0-28"

const reservations = Effect.map(InMemoryCluster, (c) =>
  c.snapshot(R.OverlappingRangeIPReservations, "kube-system").map((r) => ({ name: r.metadata.name, ...(r["spec"] as object) }))
)
const allocations = Effect.map(InMemoryCluster, (c) => (c.snapshot(R.IPPools, "kube-system").find((p) => p.metadata.name === POOL)!["spec"] as { allocations: unknown }).allocations)

/** web-0 leaked; the reborn web-0 is started by a hook at `moment` of the controller's reconcile. */
const rebornDuring = (
  moment: (call: { verb: string; resource: string; name: string | undefined }) => boolean,
  then: () => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function* () {
    const hooks = yield* ApiHooks
    yield* createNad("default", "net1", { range: "10.211.0.0/28" })
    const first = yield* startPod("default", "web-0", [on("net1")])
    const old = yield* projectionOf("default", "web-0")
    yield* deletePod(first)
    yield* cachesCaughtUp
    let reborn: RunningPod | undefined
    const env = yield* Effect.context<MemoryEnv>()
    hooks.before = once(moment, () =>
      startPod("default", "web-0", [on("net1")]).pipe(
        Effect.tap((p) => Effect.sync(() => void (reborn = p))),
        Effect.provide(env),
        Effect.orDie,
        Effect.zipRight(then())
      )
    )
    const [result] = yield* freePods([old])
    hooks.clear()
    return { first, reborn: reborn!, result: result!.outcome }
  })

describe("regression: a pod reborn while its old incarnation is being freed keeps address and reservation", () => {
  it.live("reborn between the live re-check and the controller's writes: nothing freed, reservation given back", () =>
    Effect.gen(function* () {
      const { first, reborn, result } = yield* rebornDuring((c) => c.verb === "delete" && c.resource === "overlappingrangeipreservations")
      expect(reborn.ips[0]!.ips).toEqual(first.ips[0]!.ips)
      expect(result).toMatchObject({ _tag: "Freed", freed: [] })
      expect(yield* allocations).toEqual({ "1": { id: reborn.containerId, podref: "default/web-0", ifname: "net1" } })
      expect(yield* reservations).toEqual([{ name: "10.211.0.1", podref: "default/web-0", ifname: "net1" }])
      expect(yield* eventsIn("default")).toEqual([])
    }).pipe(Effect.provide(memoryWithHooks())))

  it.live("reborn between the reservation delete and the pool write: the re-ADD recreates the reservation itself", () =>
    Effect.gen(function* () {
      const { first, reborn, result } = yield* rebornDuring((c) => c.verb === "patch" && c.resource === "ippools")
      expect(reborn.ips[0]!.ips).toEqual(first.ips[0]!.ips)
      expect(result).toMatchObject({ _tag: "Freed", freed: [] })
      expect(yield* allocations).toEqual({ "1": { id: reborn.containerId, podref: "default/web-0", ifname: "net1" } })
      expect(yield* reservations).toEqual([{ name: "10.211.0.1", podref: "default/web-0", ifname: "net1" }])
    }).pipe(Effect.provide(memoryWithHooks())))

  it.live("reborn before the controller's writes, whose pool write then fails: the reservation is given back at once", () =>
    Effect.gen(function* () {
      const cluster = yield* InMemoryCluster
      const { first, reborn, result } = yield* rebornDuring((c) => c.verb === "delete" && c.resource === "overlappingrangeipreservations", () =>
        Effect.sync(() => cluster.injectFault({ verb: "patch", resource: "ippools", times: 1 }))
      )
      expect(reborn.ips[0]!.ips).toEqual(first.ips[0]!.ips)
      expect(result).toMatchObject({ _tag: "Failed", error: { reason: "ApiError", retryable: true } })
      expect(yield* allocations).toEqual({ "1": { id: reborn.containerId, podref: "default/web-0", ifname: "net1" } })
      expect(yield* reservations).toEqual([{ name: "10.211.0.1", podref: "default/web-0", ifname: "net1" }])
    }).pipe(Effect.provide(memoryWithHooks())))

  it.live("reborn after the pool write: it gets an address and a reservation of its own", () =>
    Effect.gen(function* () {
      const { reborn, result } = yield* rebornDuring((c) => c.verb === "create" && c.resource === "events")
      expect(result).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.211.0.1" }] })
      const ip = reborn.ips[0]!.ips[0]!
      expect(yield* reservations).toEqual([{ name: ip, podref: "default/web-0", ifname: "net1" }])
    }).pipe(Effect.provide(memoryWithHooks())))
})
