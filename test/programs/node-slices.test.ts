/**
 * Node-slice pools (whereabouts 0.8+) in memory: the pools and NodeSlicePools are written here
 * as upstream's plugin and node-slice controller write them (test/live/upstream-plugin.test.ts
 * does the same with the real plugin). Two networks: "slicenet" (unnamed, NodeSlicePool named
 * after the config) and "storage" (network_name), /28 slices of a /24.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { audit } from "../../src/programs/audit.ts"
import { freePod } from "../support/free-pods.ts"
import { runSweep } from "../../src/programs/sweep.ts"
import { type PodProjection, projectPod } from "../../src/domain/pod.ts"
import { KubeApi, type KubeObject } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { memory } from "../../src/testing/layers.ts"
import { PluginStore } from "../../src/testing/PluginStore.ts"
import { ApiHooks, memoryWithHooks, once } from "../support/hooks.ts"
import { nadObject, networkStatus, podObject, poolObject } from "../support/objects.ts"
import { allocationsOf, cachesCaughtUp, eventsIn, reservationNames } from "../support/world.ts"

const NS = "default"
const POOLS = "kube-system"

const sliced = (name: string, ipam: Record<string, unknown>) =>
  nadObject(NS, name, JSON.stringify({ cniVersion: "0.3.1", name, type: "macvlan", ipam: { type: "whereabouts", node_slice_size: "/28", ...ipam } }))

const nodeSlicePool = (name: string, range: string, allocations: ReadonlyArray<[string, string]>): KubeObject => ({
  apiVersion: "whereabouts.cni.cncf.io/v1alpha1",
  kind: "NodeSlicePool",
  metadata: { name, namespace: POOLS },
  spec: { range, sliceSize: "/28" },
  status: { allocations: allocations.map(([nodeName, sliceRange]) => ({ nodeName, sliceRange })) }
})

const entry = (podref: string, ifname = "net1") => ({ id: `c-${podref.split("/")[1]}`, podref, ifname })
const reservation = (name: string, podref: string): KubeObject => ({ metadata: { name, namespace: POOLS }, spec: { podref, ifname: "net1" } })

/** A pod on `node` whose status lists `ip` on NAD `nad`. */
const podOn = (name: string, node: string, nad: string, ip: string) =>
  podObject(NS, name, { nodeName: node, status: networkStatus([{ name: "cluster", interface: "eth0", ips: ["10.244.0.9"], default: true }, { name: `${NS}/${nad}`, interface: "net1", ips: [ip] }]) })

/**
 * slicenet: node-1 owns 10.70.0.0/28 (a live, b), node-3 owned 10.70.0.32/28 but was deleted
 * (its slice is free again, its pool is left: empty). storage: node-2 owns 10.71.0.16/28 (c live, d).
 */
const world = Effect.gen(function* () {
  const api = yield* KubeApi
  yield* api.create(R.NetworkAttachmentDefinitions, NS, sliced("slicenet", { range: "10.70.0.0/24" }))
  yield* api.create(R.NetworkAttachmentDefinitions, NS, sliced("storage", { range: "10.71.0.0/24", network_name: "storage" }))
  yield* api.create(R.NodeSlicePools, POOLS, nodeSlicePool("slicenet", "10.70.0.0/24", [["node-1", "10.70.0.0/28"], ["node-2", "10.70.0.16/28"], ["", "10.70.0.32/28"]]))
  yield* api.create(R.NodeSlicePools, POOLS, nodeSlicePool("storage", "10.71.0.0/24", [["node-1", "10.71.0.0/28"], ["node-2", "10.71.0.16/28"]]))
  yield* api.create(R.IPPools, POOLS, poolObject(POOLS, "node-1-10.70.0.0-28", "10.70.0.0/28", { "1": entry("default/a"), "2": entry("default/b") }))
  yield* api.create(R.IPPools, POOLS, poolObject(POOLS, "node-3-10.70.0.32-28", "10.70.0.32/28", {}))
  yield* api.create(R.IPPools, POOLS, poolObject(POOLS, "storage-node-2-10.71.0.16-28", "10.71.0.16/28", { "1": entry("default/c"), "2": entry("default/d") }))
  for (const [name, podref] of [["10.70.0.1", "default/a"], ["10.70.0.2", "default/b"], ["storage-10.71.0.17", "default/c"], ["storage-10.71.0.18", "default/d"]] as const) {
    yield* api.create(R.OverlappingRangeIPReservations, POOLS, reservation(name, podref))
  }
  const pods: Record<string, PodProjection> = {}
  for (const [name, node, nad, ip] of [["a", "node-1", "slicenet", "10.70.0.1"], ["b", "node-1", "slicenet", "10.70.0.2"], ["c", "node-2", "storage", "10.71.0.17"], ["d", "node-2", "storage", "10.71.0.18"]] as const) {
    pods[name] = projectPod((yield* api.create(R.Pods, NS, podOn(name, node, nad, ip))) as Parameters<typeof projectPod>[0])
  }
  return pods
})

const deletePod = (name: string) => Effect.flatMap(KubeApi, (api) => api.delete(R.Pods, NS, name, { gracePeriodSeconds: 0 }))

describe("node-slice pools", () => {
  it.live("a healthy node-slice cluster audits clean: no orphans, every pool under its network with its node, the dead node's pool listed as stale", () =>
    Effect.gen(function* () {
      yield* world
      const report = yield* audit("json")
      expect(report.exitCode).toBe(0)
      const json = JSON.parse(report.text) as { pools: Array<Record<string, unknown>>; staleSlicePools: unknown; orphanedAllocations: unknown; orphanedReservations: unknown }
      expect(json.orphanedAllocations).toEqual([])
      expect(json.orphanedReservations).toEqual([])
      expect(json.pools.map((p) => [p["name"], p["network"], p["node"], p["owner"], p["size"], p["used"]])).toEqual([
        ["node-1-10.70.0.0-28", "slicenet", "node-1", "current", 14, 2],
        ["node-3-10.70.0.32-28", "slicenet", "node-3", "stale", 14, 0],
        ["storage-node-2-10.71.0.16-28", "storage", "node-2", "current", 14, 2]
      ])
      expect(json.staleSlicePools).toEqual([{ name: "node-3-10.70.0.32-28", node: "node-3", used: 0 }])
      expect((yield* audit("table")).text).toMatch(/POOL\s+RANGE\s+NETWORK\s+NODE\s+SIZE/)
    }).pipe(Effect.provide(memory())))

  it.live("a deleted pod's slice entry and its reservation (named without the node) are freed, the Event names the NAD, and no full-range pool is read", () =>
    Effect.gen(function* () {
      const pods = yield* world
      yield* deletePod("b")
      yield* deletePod("d")
      yield* cachesCaughtUp
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      expect(yield* freePod(pods["b"]!)).toEqual({ _tag: "Freed", freed: [{ ip: "10.70.0.2", pool: "node-1-10.70.0.0-28", network: "slicenet" }], reservations: 1 })
      expect(yield* freePod(pods["d"]!)).toEqual({ _tag: "Freed", freed: [{ ip: "10.71.0.18", pool: "storage-node-2-10.71.0.16-28", network: "storage" }], reservations: 1 })
      expect(cluster.calls.filter((c) => c.resource === "ippools" && c.verb !== "patch")).toEqual([])
      expect(Object.keys(yield* allocationsOf("node-1-10.70.0.0-28"))).toEqual(["1"])
      expect(Object.keys(yield* allocationsOf("storage-node-2-10.71.0.16-28"))).toEqual(["1"])
      expect(yield* reservationNames).toEqual(["10.70.0.1", "storage-10.71.0.17"])
      expect((yield* eventsIn(NS)).map((e) => `${e.name}: ${e.message}`).sort()).toEqual([
        "b: successful cleanup of IP address [10.70.0.2] from network slicenet",
        "d: successful cleanup of IP address [10.71.0.18] from network storage"
      ])
    }).pipe(Effect.provide(memory())))

  it.live("the sweep after downtime frees exactly the dead pods' slice entries and reservations", () =>
    Effect.gen(function* () {
      yield* world
      yield* deletePod("b")
      yield* deletePod("d")
      const report = yield* runSweep({ dryRun: false })
      expect(report).toMatchObject({ freed: 2, reservationsDeleted: 2, spared: 0, prunedPools: 0 })
      expect(report.orphanReservations.map((o) => `${o.name} ${o.reason}`).sort()).toEqual(["10.70.0.2 PodGone", "storage-10.71.0.18 PodGone"])
      expect(Object.keys(yield* allocationsOf("node-1-10.70.0.0-28"))).toEqual(["1"])
      expect(yield* reservationNames).toEqual(["10.70.0.1", "storage-10.71.0.17"])
      // Healthy again: the next sweep finds nothing.
      const again = yield* runSweep({ dryRun: false })
      expect(again.orphanAllocations.length + again.orphanReservations.length).toBe(0)
    }).pipe(Effect.provide(memory())))

  it.live("a pod reborn under its name re-taking its slice address gets its reservation back under the network's name, not the node's", () =>
    Effect.gen(function* () {
      const pods = yield* world
      const hooks = yield* ApiHooks
      yield* deletePod("d")
      yield* cachesCaughtUp
      const env = yield* Effect.context<PluginStore | KubeApi>()
      // Between the reservation delete and the pool patch, d is reborn and its idempotent re-ADD writes a new container id.
      hooks.after = once(
        (c) => c.verb === "delete" && c.resource === "overlappingrangeipreservations",
        () =>
          Effect.gen(function* () {
            const api = yield* KubeApi
            yield* api.create(R.Pods, NS, podOn("d", "node-2", "storage", "10.71.0.18"))
            yield* (yield* PluginStore).updatePool("storage-node-2-10.71.0.16-28", (a) => Either.right({ ...a, "2": { ...entry("default/d"), id: "reborn" } }))
          }).pipe(Effect.provide(env), Effect.orDie)
      )
      const out = yield* freePod(pods["d"]!)
      hooks.clear()
      expect(out).toEqual({ _tag: "Freed", freed: [], reservations: 1 })
      expect((yield* allocationsOf("storage-node-2-10.71.0.16-28"))["2"]).toEqual({ id: "reborn", podref: "default/d", ifname: "net1" })
      expect(yield* reservationNames).toContain("storage-10.71.0.18")
      expect((yield* reservationNames).filter((n) => n.includes("node"))).toEqual([])
    }).pipe(Effect.provide(memoryWithHooks())))

  const nodeOneDeleted = Effect.gen(function* () {
    const api = yield* KubeApi
    // node-1 is deleted too: its slice is freed, its pool still holds a's and b's entries.
    const current = yield* api.get(R.NodeSlicePools, POOLS, "slicenet")
    yield* api.replace(R.NodeSlicePools, POOLS, {
      ...nodeSlicePool("slicenet", "10.70.0.0/24", [["", "10.70.0.0/28"], ["node-2", "10.70.0.16/28"], ["", "10.70.0.32/28"]]),
      metadata: { name: "slicenet", namespace: POOLS, resourceVersion: current.metadata.resourceVersion }
    })
    return Effect.map(api.list(R.IPPools, POOLS), (l) => l.items.map((p) => p.metadata.name).sort())
  })

  it.live("without --prune-slice-pools, pools no node owns stay (audit lists them)", () =>
    Effect.gen(function* () {
      yield* world
      const pools = yield* nodeOneDeleted
      const report = yield* runSweep({ dryRun: false })
      expect(report.prunedPools).toBe(0)
      expect(report.staleSlicePools.map((p) => p.name)).toEqual(["node-1-10.70.0.0-28", "node-3-10.70.0.32-28"])
      expect(yield* pools).toEqual(["node-1-10.70.0.0-28", "node-3-10.70.0.32-28", "storage-node-2-10.71.0.16-28"])
    }).pipe(Effect.provide(memory())))

  it.live("with --prune-slice-pools, a sweep deletes only the empty pool no node owns; never one with entries, never in a dry run", () =>
    Effect.gen(function* () {
      yield* world
      const pools = yield* nodeOneDeleted
      expect((yield* runSweep({ dryRun: true })).prunedPools).toBe(0)
      expect(yield* pools).toHaveLength(3)
      const report = yield* runSweep({ dryRun: false })
      expect(report.prunedPools).toBe(1)
      expect(yield* pools).toEqual(["node-1-10.70.0.0-28", "storage-node-2-10.71.0.16-28"])
      // a still lives on its (now dead) node's pool: its entry is kept, and so is the pool.
      expect(Object.values(yield* allocationsOf("node-1-10.70.0.0-28")).map((e) => e.podref)).toEqual(["default/a", "default/b"])
    }).pipe(Effect.provide(memory({ pruneSlicePools: true }))))

  it.live("with --prune-slice-pools, the NodeSlicePool is read live first: a slice its node got back since the listing keeps its pool", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const hooks = yield* ApiHooks
      yield* world
      const pools = yield* nodeOneDeleted
      // node-3 registers again and the node-slice controller gives it its old slice, after the sweep listed.
      hooks.before = once(
        (c) => c.verb === "get" && c.resource === "nodeslicepools",
        () =>
          Effect.orDie(
            Effect.flatMap(api.get(R.NodeSlicePools, POOLS, "slicenet"), (current) =>
              api.replace(R.NodeSlicePools, POOLS, {
                ...nodeSlicePool("slicenet", "10.70.0.0/24", [["", "10.70.0.0/28"], ["node-2", "10.70.0.16/28"], ["node-3", "10.70.0.32/28"]]),
                metadata: { name: "slicenet", namespace: POOLS, resourceVersion: current.metadata.resourceVersion }
              })
            )
          )
      )
      const report = yield* runSweep({ dryRun: false })
      expect(report.staleSlicePools.map((p) => p.name)).toContain("node-3-10.70.0.32-28")
      expect(report.prunedPools).toBe(0)
      expect(yield* pools).toEqual(["node-1-10.70.0.0-28", "node-3-10.70.0.32-28", "storage-node-2-10.71.0.16-28"])
    }).pipe(Effect.provide(memoryWithHooks({ pruneSlicePools: true }))))

  it.live("with --prune-slice-pools, a NodeSlicePool that cannot be read live keeps the pool; the next sweep prunes it", () =>
    Effect.gen(function* () {
      const cluster = yield* InMemoryCluster
      yield* world
      const pools = yield* nodeOneDeleted
      cluster.injectFault({ resource: "nodeslicepools", verb: "get", reason: "Forbidden" })
      const before = cluster.calls.length
      const first = yield* runSweep({ dryRun: false })
      expect(first.prunedPools).toBe(0)
      expect(yield* pools).toHaveLength(3)
      expect(cluster.calls.slice(before).filter((c) => c.verb === "get" && c.resource === "nodeslicepools").map((c) => c.name)).toEqual(["slicenet"])
      const second = yield* runSweep({ dryRun: false })
      expect(second.prunedPools).toBe(1)
      expect(yield* pools).toEqual(["node-1-10.70.0.0-28", "storage-node-2-10.71.0.16-28"])
    }).pipe(Effect.provide(memory({ pruneSlicePools: true }))))
})
