/**
 * Found by the interleavings property (scenario [["del","leak"],["stay","stay"]]): the CNI plugin
 * (as this project plays it) checked an address's reservation, found none, wrote the pool — and
 * meanwhile another pod took the address and released its pool entry (a DEL half done: pool first,
 * reservation next). Its reservation create then met the other pod's reservation and ignored the
 * AlreadyExists, so the pod ran on an address reserved for someone else, and lost the reservation
 * for good when the other pod's DEL finished. Upstream fails such an ADD; the plugin now gives the
 * address back and takes the next one.
 */
import { PluginStore } from "../../../src/testing/PluginStore.ts"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { cniAdd } from "../../../src/testing/cni-plugin.ts"
import { releaseById } from "../../../src/testing/allocate.ts"
import { memory } from "../../../src/testing/layers.ts"
import { InMemoryCluster } from "../../../src/testing/InMemoryCluster.ts"
import { Reservations } from "../../../src/services/Reservations.ts"
import * as R from "../../../src/services/resources.ts"
import { ApiHooks, type MemoryEnv, memoryWithHooks, once } from "../../support/hooks.ts"
import { whereaboutsConfig } from "../../support/objects.ts"

const config = whereaboutsConfig({ range: "10.213.0.0/28" }, "net1")
const req = (pod: string, id: string) => ({ podNamespace: "default", podName: pod, containerId: id, ifname: "net1", config })

const state = Effect.map(InMemoryCluster, (c) => ({
  pool: (c.snapshot(R.IPPools, "kube-system")[0]!["spec"] as { allocations: unknown }).allocations,
  reservations: c.snapshot(R.OverlappingRangeIPReservations, "kube-system").map((r) => `${r.metadata.name} ${(r["spec"] as { podref: string }).podref}`)
}))

describe("regression: the CNI plugin never runs a pod on an address reserved for another", () => {
  it.live("an address whose reservation appears between the check and the claim is given back", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<MemoryEnv>()
      yield* cniAdd(req("seed", "s")) // creates the pool; seed holds .1
      // Right after b found .2 unreserved (as it re-reads the pool to write), a takes .2 and its
      // DEL frees the pool entry only.
      let checked = false
      hooks.before = once(
        (c) => {
          if (c.verb === "get" && c.resource === "overlappingrangeipreservations" && c.name === "10.213.0.2") checked = true
          return checked && c.verb === "get" && c.resource === "ippools"
        },
        () =>
          Effect.gen(function* () {
            yield* cniAdd(req("a", "a1"))
            const writer = yield* PluginStore
            yield* writer.updatePool("10.213.0.0-28", (allocations) => Either.right(releaseById(allocations, "a1", "net1").allocations))
          }).pipe(Effect.provide(env), Effect.orDie)
      )
      const b = yield* cniAdd(req("b", "b1"))
      hooks.clear()
      expect(b.map((ip) => ip.value - 0x0ad50000n)).toEqual([3n])
      expect(yield* state).toEqual({
        pool: { "1": { id: "s", podref: "default/seed", ifname: "net1" }, "3": { id: "b1", podref: "default/b", ifname: "net1" } },
        reservations: ["10.213.0.1 default/seed", "10.213.0.2 default/a", "10.213.0.3 default/b"]
      })
      // a's DEL completes (its reservation goes): nothing of b's is touched.
      yield* Effect.flatMap(Reservations, (r) => r.deleteFor("10.213.0.2", "default/a"))
      expect((yield* state).reservations).toEqual(["10.213.0.1 default/seed", "10.213.0.3 default/b"])
    }).pipe(Effect.provide(memoryWithHooks())))

  it.live("a reborn pod's own reservation (same podref) is kept as it is", () =>
    Effect.gen(function* () {
      const first = yield* cniAdd(req("web-0", "c1"))
      const again = yield* cniAdd(req("web-0", "c2"))
      expect(again).toEqual(first)
      expect(yield* state).toEqual({ pool: { "1": { id: "c2", podref: "default/web-0", ifname: "net1" } }, reservations: ["10.213.0.1 default/web-0"] })
    }).pipe(Effect.provide(memory())))
})
