/**
 * The invariants over one view: a table of worlds per kind, and of the worlds that look like a
 * violation and are none (a Pending pod, an ADD in flight, a reborn pod before its status, named
 * networks or overlapping-off ranges sharing addresses, the default network, dual-stack).
 */
import { describe, expect, it } from "@effect/vitest"
import { listedByIndex } from "../../src/domain/claims.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { formatIP } from "../../src/domain/ip.ts"
import {
  type InvariantView,
  INVARIANT_KINDS,
  countByKind,
  invariantViolations,
  makeEntryLookup,
  violationsPausing
} from "../../src/domain/invariants.ts"
import type { PodProjection } from "../../src/domain/pod.ts"
import { type ParsedPool, parsePool } from "../../src/domain/pool.ts"
import { ip, listSnapshot, whereaboutsNad as nad } from "./helpers.ts"
import { listing } from "../support/objects.ts"


const NADS = [
  nad("storage", { range: "10.50.0.0/24" }),
  nad("wide", { range: "10.50.0.0/16" }),
  nad("storage-off", { range: "10.51.0.0/24", enable_overlapping_ranges: false }),
  nad("wide-off", { range: "10.51.0.0/16", enable_overlapping_ranges: false }),
  nad("blue", { range: "10.60.0.0/24", network_name: "blue" }),
  nad("green", { range: "10.60.0.0/24", network_name: "green" }),
  nad("dual", { ipRanges: [{ range: "10.70.0.0/24" }, { range: "fd00:70::/64" }] }),
  nad("sliced", { range: "10.80.0.0/16", node_slice_size: "/24" }),
  { namespace: "default", name: "bridge", config: decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name: "bridge", type: "bridge", ipam: { type: "host-local" } })) },
  { namespace: "default", name: "broken", config: decodeNadConfig("{not json") }
]
const SLICES = [{ name: "sliced", resourceVersion: "1", range: "10.80.0.0/16", sliceSize: "/24", allocations: [{ nodeName: "node-a", sliceRange: "10.80.1.0/24" }] }]
const RANGES: Readonly<Record<string, string>> = {
  "10.50.0.0-24": "10.50.0.0/24",
  "10.50.0.0-16": "10.50.0.0/16",
  "10.50.0.0-25": "10.50.0.0/25",
  "10.51.0.0-25": "10.51.0.0/25",
  "10.51.0.0-24": "10.51.0.0/24",
  "10.51.0.0-16": "10.51.0.0/16",
  "blue-10.60.0.0-24": "10.60.0.0/24",
  "green-10.60.0.0-24": "10.60.0.0/24",
  "10.70.0.0-24": "10.70.0.0/24",
  "fd00-70---64": "fd00:70::/64",
  "node-a-10.80.1.0-24": "10.80.1.0/24"
}

type Alloc = { readonly podref: string; readonly id?: string }
/** Pools by name, allocations by offset; the range comes from RANGES. */
type Pools = Readonly<Record<string, Readonly<Record<string, Alloc>>>>

const poolOf = (name: string, allocations: Readonly<Record<string, Alloc>>): ParsedPool =>
  parsePool({
    metadata: { name },
    spec: { range: RANGES[name]!, allocations: Object.fromEntries(Object.entries(allocations).map(([k, a]) => [k, { id: a.id ?? `c-${a.podref}`, podref: a.podref, ifname: "net1" }])) }
  })

const viewOf = (pods: ReadonlyArray<PodProjection>, pools: Pools, reservations: Readonly<Record<string, string>> = {}): InvariantView => {
  const parsed = Object.entries(pools).map(([name, a]) => poolOf(name, a))
  const records = Object.entries(reservations).map(([name, podref]) => ({ name, resourceVersion: "1", podref }))
  const snapshot = listSnapshot(parsed, records, NADS, SLICES)
  return {
    pods,
    listedBy: listedByIndex(pods),
    pod: (ref) => pods.find((p) => `${p.namespace}/${p.name}` === ref),
    pools: parsed,
    pool: snapshot.pool,
    poolsHeldBy: snapshot.poolsHeldBy,
    origin: snapshot.origin,
    reservation: snapshot.reservation,
    nad: snapshot.nad,
    nodeSlice: snapshot.nodeSlice,
    entryAt: makeEntryLookup(),
    reservationNetwork: snapshot.reservationNetwork
  }
}

const pod = (name: string, status: ReadonlyArray<Record<string, unknown>> | undefined, extra: Partial<PodProjection> = {}): PodProjection => ({
  namespace: "default",
  name,
  uid: `uid-${name}`,
  phase: "Running",
  nodeName: "node-a",
  ...(status === undefined ? {} : { networkStatus: JSON.stringify(status) }),
  ...extra
})
const CLUSTER = { name: "cluster", interface: "eth0", ips: ["10.244.0.5"], default: true }

/** Each violation as `kind ip pods [holder]`, sorted. */
const judge = (view: InvariantView): ReadonlyArray<string> =>
  invariantViolations(view)
    .map((v) => [v.kind, formatIP(v.ip), v.pods.map((p) => p.name).join("+"), ...(v.holder === undefined ? [] : [`for:${v.holder}`])].join(" "))
    .sort()

describe("invariantViolations: each kind", () => {
  it.each([
    ["live-not-held: the pool holds nothing at the address", [pod("a", [CLUSTER, listing("storage", ["10.50.0.1/24"])])], { "10.50.0.0-24": {} }, { "10.50.0.1": "default/a" }, ["live-not-held 10.50.0.1 a"]],
    ["live-not-held: a node slice's pool of the pod's node", [pod("a", [listing("sliced", ["10.80.1.1/16"])])], { "node-a-10.80.1.0-24": {} }, { "10.80.1.1": "default/a" }, ["live-not-held 10.80.1.1 a"]],
    [
      "live-not-held: a named network, though another network sharing its CIDR holds the address for the pod",
      [pod("a", [listing("blue", ["10.60.0.1/24"])])],
      { "blue-10.60.0.0-24": {}, "green-10.60.0.0-24": { "1": { podref: "default/a" } } },
      { "blue-10.60.0.1": "default/a" },
      ["live-not-held 10.60.0.1 a"]
    ],
    [
      "live-not-held: a pool of the network's earlier range holds the address, for another pod",
      [pod("a", [listing("storage", ["10.50.0.1/24"])])],
      { "10.50.0.0-24": {}, "10.50.0.0-25": { "1": { podref: "default/gone" } } },
      { "10.50.0.1": "default/a" },
      ["live-not-held 10.50.0.1 a"]
    ],
    [
      "reservation-drift: the pool of the network's earlier range holds the address for the pod, the reservation names another",
      [pod("a", [listing("storage", ["10.50.0.1/24"])])],
      { "10.50.0.0-24": {}, "10.50.0.0-25": { "1": { podref: "default/a" } } },
      { "10.50.0.1": "default/gone" },
      ["reservation-drift 10.50.0.1 a for:default/gone"]
    ],
    ["held-for-another: the entry names a pod that does not exist (overlapping on)", [pod("a", [listing("storage", ["10.50.0.1/24"])])], { "10.50.0.0-24": { "1": { podref: "default/someone-else" } } }, { "10.50.0.1": "default/a" }, ["held-for-another 10.50.0.1 a for:default/someone-else"]],
    ["held-for-another: overlapping off", [pod("a", [listing("storage-off", ["10.51.0.1/24"])])], { "10.51.0.0-24": { "1": { podref: "default/someone-else" } } }, {}, ["held-for-another 10.51.0.1 a for:default/someone-else"]],
    [
      "held-for-another: the entry names another running pod (which lists another address)",
      [pod("a", [listing("storage", ["10.50.0.1/24"])]), pod("b", [listing("storage", ["10.50.0.2/24"])])],
      { "10.50.0.0-24": { "1": { podref: "default/b" }, "2": { podref: "default/b" } } },
      { "10.50.0.1": "default/a", "10.50.0.2": "default/b" },
      ["held-for-another 10.50.0.1 a for:default/b"]
    ],
    [
      "duplicate: two running pods list one address of one pool",
      [pod("a", [listing("storage", ["10.50.0.1/24"])]), pod("b", [listing("storage", ["10.50.0.1/24"])])],
      { "10.50.0.0-24": { "1": { podref: "default/a" } } },
      { "10.50.0.1": "default/a" },
      ["duplicate 10.50.0.1 a+b", "held-for-another 10.50.0.1 b for:default/a"]
    ],
    [
      "duplicate: two running pods list one address in two pools of one network with overlapping ranges on",
      [pod("a", [listing("storage", ["10.50.0.1/24"])]), pod("b", [listing("wide", ["10.50.0.1/16"])])],
      { "10.50.0.0-24": { "1": { podref: "default/a" } }, "10.50.0.0-16": { "1": { podref: "default/b" } } },
      { "10.50.0.1": "default/a" },
      ["duplicate 10.50.0.1 a+b", "reservation-drift 10.50.0.1 b for:default/a"]
    ],
    [
      "duplicate: two overlapping pools of one network hold one address for two running pods",
      [pod("a", undefined), pod("b", undefined)],
      { "10.50.0.0-24": { "1": { podref: "default/a" } }, "10.50.0.0-16": { "1": { podref: "default/b" } } },
      { "10.50.0.1": "default/a" },
      ["duplicate 10.50.0.1 a+b"]
    ],
    ["reservation-drift: no reservation", [pod("a", [listing("storage", ["10.50.0.1/24"])])], { "10.50.0.0-24": { "1": { podref: "default/a" } } }, {}, ["reservation-drift 10.50.0.1 a"]],
    ["reservation-drift: the reservation names another pod", [pod("a", [listing("storage", ["10.50.0.1/24"])])], { "10.50.0.0-24": { "1": { podref: "default/a" } } }, { "10.50.0.1": "default/x" }, ["reservation-drift 10.50.0.1 a for:default/x"]],
    ["reservation-drift: a named network's reservation", [pod("a", [listing("blue", ["10.60.0.1/24"])])], { "blue-10.60.0.0-24": { "1": { podref: "default/a" } } }, { "10.60.0.1": "default/a" }, ["reservation-drift 10.60.0.1 a"]],
    [
      "dual-stack: only the IPv6 address is not held",
      [pod("a", [listing("dual", ["10.70.0.1/24", "fd00:70::1/64"])])],
      { "10.70.0.0-24": { "1": { podref: "default/a" } }, "fd00-70---64": {} },
      { "10.70.0.1": "default/a", "fd00-70--1": "default/a" },
      ["live-not-held fd00:70::1 a"]
    ]
  ] as const)("%s", (_name, pods, pools, reservations, expected) => {
    expect(judge(viewOf(pods, pools, reservations))).toEqual(expected)
  })
})

describe("invariantViolations: what looks like a violation and is none", () => {
  const held = { "10.50.0.0-24": { "1": { podref: "default/a" } } }
  const reserved = { "10.50.0.1": "default/a" }
  it.each([
    ["a pod that holds and has reserved what it lists", [pod("a", [CLUSTER, listing("storage", ["10.50.0.1/24"])])], held, reserved],
    ["a Pending pod whose address is not held (yet)", [pod("a", [listing("storage", ["10.50.0.1/24"])], { phase: "Pending" })], {}, {}],
    ["an ADD in flight: the entry and reservation written, the status not yet", [pod("a", undefined, { phase: "Pending" })], held, reserved],
    ["a running pod whose status is not written", [pod("a", undefined)], held, reserved],
    ["a terminating pod whose CNI DEL freed its address", [pod("a", [listing("storage", ["10.50.0.1/24"])], { deletionTimestamp: "2026-11-03T10:00:00Z" })], {}, {}],
    ["a pod that finished", [pod("a", [listing("storage", ["10.50.0.1/24"])], { phase: "Succeeded" })], {}, {}],
    ["a reborn StatefulSet pod between its ADD and its status: the entry names its podref with the new id", [pod("db-0", undefined, { phase: "Pending", uid: "uid-new" })], { "10.50.0.0-24": { "1": { podref: "default/db-0", id: "new" } } }, { "10.50.0.1": "default/db-0" }],
    ["a reborn pod running on its address before its re-ADD rewrote the entry's id", [pod("db-0", [listing("storage", ["10.50.0.1/24"])], { uid: "uid-new" })], { "10.50.0.0-24": { "1": { podref: "default/db-0", id: "old" } } }, { "10.50.0.1": "default/db-0" }],
    [
      "named networks sharing a CIDR: one address in each, for two pods",
      [pod("a", [listing("blue", ["10.60.0.1/24"])]), pod("b", [listing("green", ["10.60.0.1/24"])])],
      { "blue-10.60.0.0-24": { "1": { podref: "default/a" } }, "green-10.60.0.0-24": { "1": { podref: "default/b" } } },
      { "blue-10.60.0.1": "default/a", "green-10.60.0.1": "default/b" }
    ],
    [
      "overlapping ranges off: two pools of the unnamed network, one address in each for two pods",
      [pod("a", [listing("storage-off", ["10.51.0.1/24"])]), pod("b", [listing("wide-off", ["10.51.0.1/16"])])],
      { "10.51.0.0-24": { "1": { podref: "default/a" } }, "10.51.0.0-16": { "1": { podref: "default/b" } } },
      {}
    ],
    ["the default network's address, in no pool", [pod("a", [CLUSTER])], {}, {}],
    ["two pods listing one default-network address (another IPAM's)", [pod("a", [CLUSTER]), pod("b", [CLUSTER])], {}, {}],
    ["an address on a NAD of another IPAM", [pod("a", [listing("bridge", ["10.50.0.1/24"])])], {}, {}],
    ["an address on a NAD that is gone, or whose config cannot be read", [pod("a", [listing("deleted", ["10.50.0.1/24"])]), pod("b", [listing("broken", ["10.50.0.2/24"])])], {}, {}],
    ["a node-slice address of a node without a slice", [pod("a", [listing("sliced", ["10.80.9.1/16"])], { nodeName: "node-z" })], {}, {}],
    ["a status that cannot be read", [pod("a", undefined, { networkStatus: "[{broken" })], {}, {}],
    [
      "dual-stack, both addresses held and reserved",
      [pod("a", [listing("dual", ["10.70.0.1/24", "fd00:70::1/64"])])],
      { "10.70.0.0-24": { "1": { podref: "default/a" } }, "fd00-70---64": { "1": { podref: "default/a" } } },
      { "10.70.0.1": "default/a", "fd00-70--1": "default/a" }
    ],
    [
      "overlapping pools of one network holding one address for a running pod and for one that is gone",
      [pod("a", [listing("storage", ["10.50.0.1/24"])])],
      { "10.50.0.0-24": { "1": { podref: "default/a" } }, "10.50.0.0-16": { "1": { podref: "default/gone" } } },
      reserved
    ],
    ["a network none of whose pools this namespace holds (its pools may be another namespace's), even with a reservation of the address", [pod("a", [listing("storage", ["10.50.0.1/24"])])], {}, { "10.50.0.1": "default/a" }],
    ["two pods listing one address on a network none of whose pools this namespace holds", [pod("a", [listing("storage", ["10.50.0.1/24"])]), pod("b", [listing("storage", ["10.50.0.1/24"])])], {}, {}],
    [
      "a NAD's range edited after the ADD: the pool of the range the pod got its address from, which the config no longer names, holds it, reserved",
      [pod("a", [listing("storage", ["10.50.0.1/24"])])],
      { "10.50.0.0-24": {}, "10.50.0.0-25": { "1": { podref: "default/a" } } },
      reserved
    ],
    [
      "the same with overlapping ranges off",
      [pod("a", [listing("storage-off", ["10.51.0.1/24"])])],
      { "10.51.0.0-24": {}, "10.51.0.0-25": { "1": { podref: "default/a" } } },
      {}
    ],
    ["one pod listing its address on two interfaces", [pod("a", [listing("storage", ["10.50.0.1/24"]), listing("storage", ["10.50.0.1/24"], "net2")])], held, reserved]
  ] as const)("%s", (_name, pods, pools, reservations) => {
    expect(judge(viewOf(pods, pools, reservations))).toEqual([])
  })
})

describe("a violation as reported", () => {
  it("names every object in its message, keeps its id across evaluations, and a reborn pod makes a new one", () => {
    const world = (uid: string) => viewOf([pod("a", [listing("storage", ["10.50.0.1/24"])], { uid })], { "10.50.0.0-24": { "1": { podref: "default/someone-else" } } }, { "10.50.0.1": "default/a" })
    const [v] = invariantViolations(world("uid-1"))
    expect(v).toMatchObject({ kind: "held-for-another", pools: ["10.50.0.0-24"], reservation: "10.50.0.1", holder: "default/someone-else", pods: [{ namespace: "default", name: "a", uid: "uid-1" }] })
    expect(v!.message).toBe("IP address 10.50.0.1 that pod default/a lists on network default/storage is allocated to default/someone-else in IPPool 10.50.0.0-24")
    expect(invariantViolations(world("uid-1"))[0]!.id).toBe(v!.id)
    expect(invariantViolations(world("uid-2"))[0]!.id).not.toBe(v!.id)
  })

  it.each([
    ["live-not-held", [pod("a", [listing("storage", ["10.50.0.1/24"])])], { "10.50.0.0-24": {} }, { "10.50.0.1": "default/a" }, "IP address 10.50.0.1 that pod default/a lists on network default/storage has no allocation in IPPool 10.50.0.0-24: the next pod can be handed it"],
    [
      "duplicate (listed)",
      [pod("a", [listing("storage", ["10.50.0.1/24"])]), pod("b", [listing("wide", ["10.50.0.1/16"])])],
      { "10.50.0.0-24": { "1": { podref: "default/a" } }, "10.50.0.0-16": { "1": { podref: "default/b" } } },
      { "10.50.0.1": "default/a" },
      "IP address 10.50.0.1 is listed by two running pods in one network: default/a on default/storage and default/b on default/wide"
    ],
    [
      "duplicate (held)",
      [pod("a", undefined), pod("b", undefined)],
      { "10.50.0.0-24": { "1": { podref: "default/a" } }, "10.50.0.0-16": { "1": { podref: "default/b" } } },
      {},
      "IP address 10.50.0.1 is allocated more than once in one network: to default/b in IPPool 10.50.0.0-16 and to default/a in IPPool 10.50.0.0-24"
    ],
    [
      "reservation-drift (missing)",
      [pod("a", [listing("storage", ["10.50.0.1/24"])])],
      { "10.50.0.0-24": { "1": { podref: "default/a" } } },
      {},
      "IP address 10.50.0.1 that pod default/a holds in IPPool 10.50.0.0-24 has no OverlappingRangeIPReservation 10.50.0.1: an ADD in another pool of its network can be handed it"
    ],
    [
      "reservation-drift (another pod)",
      [pod("a", [listing("storage", ["10.50.0.1/24"])])],
      { "10.50.0.0-24": { "1": { podref: "default/a" } } },
      { "10.50.0.1": "default/x" },
      "IP address 10.50.0.1 that pod default/a holds in IPPool 10.50.0.0-24 has its OverlappingRangeIPReservation 10.50.0.1 naming default/x"
    ]
  ] as const)("%s: its message", (_name, pods, pools, reservations, message) => {
    expect(invariantViolations(viewOf(pods, pools, reservations)).map((v) => v.message)).toContain(message)
  })

  it("countByKind names every kind", () => {
    const view = viewOf([pod("a", [listing("storage", ["10.50.0.1/24"])]), pod("b", [listing("storage", ["10.50.0.2/24"])])], { "10.50.0.0-24": { "2": { podref: "default/b" } } }, {})
    expect(countByKind(invariantViolations(view))).toEqual({ "live-not-held": 1, "held-for-another": 0, duplicate: 0, "reservation-drift": 1 })
    expect(Object.keys(countByKind([]))).toEqual([...INVARIANT_KINDS])
  })
})

describe("makeEntryLookup", () => {
  it("finds an entry by address in a small pool and in a searched one, and judges each version of a pool anew", () => {
    const lookup = makeEntryLookup()
    const small = poolOf("10.50.0.0-24", { "1": { podref: "default/a" } })
    const big = poolOf("10.50.0.0-16", Object.fromEntries(Array.from({ length: 20 }, (_, i) => [String(i + 1), { podref: `default/p${i + 1}` }])))
    expect(lookup(small, ip("10.50.0.1"))?.podref).toBe("default/a")
    expect(lookup(small, ip("10.50.0.2"))).toBeUndefined()
    expect(lookup(big, ip("10.50.0.20"))?.podref).toBe("default/p20")
    expect(lookup(big, ip("10.50.0.21"))).toBeUndefined()
    expect(lookup(big, ip("10.49.255.255"))).toBeUndefined()
    const changed = poolOf("10.50.0.0-16", Object.fromEntries(Array.from({ length: 20 }, (_, i) => [String(i + 1), { podref: `default/q${i + 1}` }])))
    expect(lookup(changed, ip("10.50.0.20"))?.podref).toBe("default/q20")
  })

  it("finds every entry of a pool whose entries are out of offset order: IPv6 offsets past 2^32 - 2; and no entry of another address family", () => {
    const lookup = makeEntryLookup()
    const far = 2n ** 40n
    const offsets = [...Array.from({ length: 10 }, (_, i) => far + BigInt(10 - i)), 5n, 3n]
    const v6 = poolOf("fd00-70---64", Object.fromEntries(offsets.map((o) => [o.toString(), { podref: `default/v${o}` }])))
    expect(v6.entries.map((e) => e.key)).not.toEqual([...v6.entries.map((e) => e.key)].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)))
    for (const o of offsets) expect(lookup(v6, { family: 6, value: 0xfd000070n * 2n ** 96n + o })?.podref).toBe(`default/v${o}`)
    expect(lookup(v6, { family: 6, value: 0xfd000070n * 2n ** 96n + far })).toBeUndefined()
    const v4 = poolOf("10.50.0.0-16", Object.fromEntries(Array.from({ length: 10 }, (_, i) => [String(i + 1), { podref: `default/p${i + 1}` }])))
    expect(lookup(v4, { family: 6, value: ip("10.50.0.3").value })).toBeUndefined()
    expect(lookup(v4, ip("10.50.0.3"))?.podref).toBe("default/p3")
  })
})

describe("a snapshot's reservationNetwork", () => {
  it("names the network of pools a NAD with overlapping ranges writes, none for the others; a pool no NAD writes as the caller asks", () => {
    const view = viewOf([], {})
    const of = (name: string, allocations = {}) => view.reservationNetwork(poolOf(name, allocations), "none")
    expect(of("10.50.0.0-24")).toBe("")
    expect(of("blue-10.60.0.0-24")).toBe("blue")
    expect(of("node-a-10.80.1.0-24")).toBe("")
    expect(of("10.51.0.0-24")).toBeUndefined()
    expect(listSnapshot([], []).reservationNetwork(poolOf("10.50.0.0-24", {}), "none")).toBeUndefined()
    // No NAD known to write it: named when freeing (a reservation left behind would keep its address).
    expect(listSnapshot([], []).reservationNetwork(poolOf("10.50.0.0-24", {}), "named")).toBe("")
    expect(view.reservationNetwork(poolOf("10.51.0.0-24", {}), "named")).toBeUndefined()
  })
})

describe("a duplicate listed by two pods", () => {
  it("reads the same whichever pod comes first", () => {
    const a = pod("a", [listing("storage", ["10.50.0.1/24"])])
    const b = pod("b", [listing("wide", ["10.50.0.1/16"])])
    const pools = { "10.50.0.0-24": { "1": { podref: "default/a" } }, "10.50.0.0-16": { "1": { podref: "default/b" } } }
    const of = (pods: ReadonlyArray<PodProjection>) => invariantViolations(viewOf(pods, pools, { "10.50.0.1": "default/a" })).filter((v) => v.kind === "duplicate")
    expect(of([b, a])).toEqual(of([a, b]))
    expect(of([a, b]).map((v) => v.pods.map((p) => p.name))).toEqual([["a", "b"]])
  })
})

describe("violationsPausing", () => {
  it("pauses after every n pods it passes, judged or not, and ends with what invariantViolations finds", () => {
    // Five pods: a holds its address, b lists one nobody holds, c is Pending, d lists a's address (held for a), e holds its own.
    const pods = [
      pod("a", [listing("storage", ["10.50.0.1/24"])]),
      pod("b", [listing("storage", ["10.50.0.2/24"])]),
      pod("c", undefined, { phase: "Pending" }),
      pod("d", [listing("storage", ["10.50.0.1/24"])]),
      pod("e", [listing("storage", ["10.50.0.5/24"])])
    ]
    const view = viewOf(pods, { "10.50.0.0-24": { "1": { podref: "default/a" }, "5": { podref: "default/e" } } }, { "10.50.0.1": "default/a", "10.50.0.5": "default/e" })
    const steps = violationsPausing(view, 2)
    let pauses = 0
    for (let step = steps.next(); ; step = steps.next()) {
      if (step.done === true) {
        expect(step.value).toEqual(invariantViolations(view))
        break
      }
      pauses++
    }
    expect(pauses).toBe(2)
    expect(countByKind(invariantViolations(view))).toEqual({ "live-not-held": 1, "held-for-another": 1, duplicate: 1, "reservation-drift": 0 })
  })
})
