/**
 * The CNI simulation on the in-memory cluster, for what upstream's plugin (v0.9.2) writes beyond
 * the allocation rules: test/live/simulation-contract.test.ts holds the same sequences to the real
 * plugin; these keep them in the unit tier, where the plugin binary is not needed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { formatIP } from "../../src/domain/ip.ts"
import * as R from "../../src/services/resources.ts"
import { cniAdd, cniDel } from "../../src/testing/cni-plugin.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { memory } from "../../src/testing/layers.ts"
import { whereaboutsConfig } from "../support/objects.ts"

const NS = "kube-system"
const call = (pod: string, containerId: string, ipam: Record<string, unknown>, ifname = "net1") => ({
  podNamespace: "apps",
  podName: pod,
  containerId,
  ifname,
  config: whereaboutsConfig(ipam)
})
const add = (pod: string, containerId: string, ipam: Record<string, unknown>) => Effect.map(cniAdd(call(pod, containerId, ipam)), (ips) => ips.map(formatIP))
const del = (pod: string, containerId: string, ipam: Record<string, unknown>) => cniDel(call(pod, containerId, ipam))

/** Pool name → offset → "podref id"; reservation name → its spec. */
const written = Effect.map(InMemoryCluster, (c) => ({
  pools: Object.fromEntries(
    c.snapshot(R.IPPools, NS).map((p) => {
      const allocations = (p["spec"] as { allocations: Record<string, { id: string; podref: string }> }).allocations
      return [p.metadata.name, Object.fromEntries(Object.entries(allocations).map(([k, a]) => [k, `${a.podref} ${a.id}`]))]
    })
  ),
  reservations: Object.fromEntries(c.snapshot(R.OverlappingRangeIPReservations, NS).map((r) => [r.metadata.name, r["spec"]]))
}))

describe("the CNI simulation writes what upstream's plugin writes", () => {
  it.effect("reservations hold podref and ifname, no container id", () =>
    Effect.gen(function* () {
      expect(yield* add("a", "c1", { range: "10.70.0.0/24" })).toEqual(["10.70.0.1"])
      expect((yield* written).reservations).toEqual({ "10.70.0.1": { podref: "apps/a", ifname: "net1" } })
    }).pipe(Effect.provide(memory())))

  it.effect("a DEL on a range never used leaves an empty pool", () =>
    Effect.gen(function* () {
      yield* del("z", "c9", { range: "10.71.0.0/24" })
      expect(yield* written).toEqual({ pools: { "10.71.0.0-24": {} }, reservations: {} })
    }).pipe(Effect.provide(memory())))

  it.effect("a DEL stops at the first range without the container's entry", () =>
    Effect.gen(function* () {
      yield* add("a", "c1", { range: "10.72.1.0/24" })
      yield* del("a", "c1", { ipRanges: [{ range: "10.72.0.0/24" }, { range: "10.72.1.0/24" }] })
      expect(yield* written).toEqual({
        pools: { "10.72.0.0-24": {}, "10.72.1.0-24": { "1": "apps/a c1" } },
        reservations: { "10.72.1.1": { podref: "apps/a", ifname: "net1" } }
      })
    }).pipe(Effect.provide(memory())))

  it.effect("a DEL stops, successfully, after a range whose reservation delete found nothing", () =>
    Effect.gen(function* () {
      const ranges = [{ range: "10.73.0.0/24" }, { range: "fd00:73::/64" }]
      yield* add("a", "c1", { ipRanges: ranges, enable_overlapping_ranges: false })
      yield* del("a", "c1", { ipRanges: ranges })
      expect(yield* written).toEqual({ pools: { "10.73.0.0-24": {}, "fd00-73---64": { "1": "apps/a c1" } }, reservations: {} })
    }).pipe(Effect.provide(memory())))

  it.effect("a DEL deletes the freed address's reservation whoever holds it", () =>
    Effect.gen(function* () {
      yield* add("a", "c1", { range: "10.74.0.0/24" })
      yield* add("b", "c2", { range: "10.74.0.0/26", enable_overlapping_ranges: false })
      yield* del("b", "c2", { range: "10.74.0.0/26" })
      expect((yield* written).reservations).toEqual({})
      // Nothing now blocks 10.74.0.1 in the /26: a second pod is handed a's address.
      expect(yield* add("c", "c3", { range: "10.74.0.0/26" })).toEqual(["10.74.0.1"])
    }).pipe(Effect.provide(memory())))

  it.effect("a re-ADD that found its own reservation in one range writes none in later ones", () =>
    Effect.gen(function* () {
      yield* add("a", "c1", { ipRanges: [{ range: "10.75.0.0/24" }] })
      expect(yield* add("a", "c2", { ipRanges: [{ range: "10.75.0.0/24" }, { range: "fd00:75::/64" }] })).toEqual(["10.75.0.1", "fd00:75::1"])
      expect(yield* written).toEqual({
        pools: { "10.75.0.0-24": { "1": "apps/a c2" }, "fd00-75---64": { "1": "apps/a c2" } },
        reservations: { "10.75.0.1": { podref: "apps/a", ifname: "net1" } }
      })
    }).pipe(Effect.provide(memory())))

  it.effect("an exclude that does not parse fails an ADD needing a new address, after the ranges before it and its pool were written", () =>
    Effect.gen(function* () {
      const bad = { ipRanges: [{ range: "10.77.0.0/24" }, { range: "10.77.1.0/24", exclude: ["10.77.1.01"] }] }
      const failed = yield* Effect.either(add("a", "c1", bad))
      expect(Either.isLeft(failed) && failed.left.message).toBe('range 10.77.1.0/24: exclude "10.77.1.01" is not an IP address or CIDR')
      expect(yield* written).toEqual({
        pools: { "10.77.0.0-24": { "1": "apps/a c1" }, "10.77.1.0-24": {} },
        reservations: { "10.77.0.1": { podref: "apps/a", ifname: "net1" } }
      })
      // The pod's own address needs no search: a re-ADD returns it, and the DEL frees it.
      yield* add("b", "c2", { range: "10.77.1.0/24" })
      expect(yield* add("b", "c3", { range: "10.77.1.0/24", exclude: ["10.77.1.01"] })).toEqual(["10.77.1.1"])
      yield* del("b", "c3", { range: "10.77.1.0/24", exclude: ["10.77.1.01"] })
      expect((yield* written).pools["10.77.1.0-24"]).toEqual({})
    }).pipe(Effect.provide(memory())))

  it.effect("a re-ADD onto an address another pod reserved fails and leaves the entry as it was", () =>
    Effect.gen(function* () {
      yield* add("a", "c1", { range: "10.76.0.0/24" })
      yield* add("b", "c2", { range: "10.76.0.0/26", enable_overlapping_ranges: false })
      const again = yield* Effect.either(add("b", "c3", { range: "10.76.0.0/26" }))
      expect(Either.isLeft(again) && again.left.message).toBe(
        "apps/b net1 holds 10.76.0.1 in pool 10.76.0.0-26, but its overlapping-range reservation belongs to apps/a"
      )
      expect(yield* written).toEqual({
        pools: { "10.76.0.0-24": { "1": "apps/a c1" }, "10.76.0.0-26": { "1": "apps/b c2" } },
        reservations: { "10.76.0.1": { podref: "apps/a", ifname: "net1" } }
      })
    }).pipe(Effect.provide(memory())))
})
