/**
 * Rule 0: who else lists an address in its collision domain. Table tests over one world of NADs:
 * each row is a pod's network-status and the entry it would be asked about.
 */
import { describe, expect, it } from "@effect/vitest"
import { type ClaimSource, claimDomains, claimantsOf, entryDomains, listedIPKeys, reservationClaimants, separateHeldForAnother, withClaimants } from "../../src/domain/claims.ts"
import { claimSource } from "../../src/programs/snapshot.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { ipKey } from "../../src/domain/ip.ts"
import type { Orphans } from "../../src/domain/orphans.ts"
import type { ParsedPool, ReservationRecord } from "../../src/domain/pool.ts"
import type { PodProjection } from "../../src/domain/pod.ts"
import { poolName, reservationName } from "../../src/domain/pool.ts"
import type { Holding } from "../../src/domain/release.ts"
import { ip, listSnapshot, whereaboutsNad as nad } from "./helpers.ts"
import { listing } from "../support/objects.ts"


const NADS = [
  nad("storage", { range: "10.50.0.0/24" }),
  nad("storage-off", { range: "10.51.0.0/24", enable_overlapping_ranges: false }),
  nad("wide", { range: "10.50.0.0/16" }),
  nad("wide-off", { range: "10.50.0.0/16", enable_overlapping_ranges: false }),
  nad("blue", { range: "10.60.0.0/24", network_name: "blue" }),
  nad("green", { range: "10.60.0.0/24", network_name: "green" }),
  nad("dual", { ipRanges: [{ range: "10.70.0.0/24" }, { range: "fd00:70::/64" }] }),
  nad("sliced", { range: "10.80.0.0/16", node_slice_size: "/24" }),
  { namespace: "default", name: "bridge", config: decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name: "bridge", type: "bridge", ipam: { type: "host-local" } })) },
  { namespace: "default", name: "broken", config: decodeNadConfig("{not json") }
]
const snapshot = listSnapshot([], [], NADS, [
  { name: "sliced", resourceVersion: "1", range: "10.80.0.0/16", sliceSize: "/24", allocations: [{ nodeName: "node-a", sliceRange: "10.80.1.0/24" }] }
])

const pod = (name: string, status: ReadonlyArray<Record<string, unknown>>, extra: Partial<PodProjection> = {}): PodProjection => ({
  namespace: "default",
  name,
  uid: `uid-${name}`,
  phase: "Running",
  nodeName: "node-a",
  networkStatus: JSON.stringify(status),
  ...extra
})

const sourceOf = (pods: ReadonlyArray<PodProjection>): ClaimSource => ({
  listedBy: (a) => pods.filter((p) => listedIPKeys(p).includes(ipKey(a))),
  nad: snapshot.nad,
  nodeSlice: snapshot.nodeSlice
})

/** The claimants of an entry of `pool` at `address` named for `podref`, among `pods`. */
const claimants = (pool: string, address: string, pods: ReadonlyArray<PodProjection>, reservation?: string, podref = "default/someone-else") =>
  claimantsOf(entryDomains(pool, ip(address), reservation), ip(address), podref, sourceOf(pods))

describe("claimantsOf: another live pod listing the address in the same collision domain", () => {
  it.each([
    ["the same pool (overlapping on)", "10.50.0.0-24", "10.50.0.1", "10.50.0.1", [listing("storage", ["10.50.0.1/24"])], ["default/mon-a"]],
    ["the same pool (overlapping off)", "10.51.0.0-24", "10.51.0.1", undefined, [listing("storage-off", ["10.51.0.1/24"])], ["default/mon-a"]],
    ["another pool of the unnamed network, overlapping on in both", "10.50.0.0-24", "10.50.0.1", "10.50.0.1", [listing("wide", ["10.50.0.1/16"])], ["default/mon-a"]],
    ["another pool whose network has overlapping off: its own domain", "10.50.0.0-24", "10.50.0.1", "10.50.0.1", [listing("wide-off", ["10.50.0.1/16"])], []],
    ["a named network sharing the CIDR: its own domain", poolName("10.60.0.0/24", "blue"), "10.60.0.1", reservationName(ip("10.60.0.1"), "blue"), [listing("green", ["10.60.0.1/24"])], []],
    ["the same named network", poolName("10.60.0.0/24", "blue"), "10.60.0.1", reservationName(ip("10.60.0.1"), "blue"), [listing("blue", ["10.60.0.1/24"])], ["default/mon-a"]],
    ["dual-stack: the IPv6 address", "fd00-70---64", "fd00:70::1", "fd00-70--1", [listing("dual", ["10.70.0.1/24", "fd00:70::1/64"])], ["default/mon-a"]],
    ["a node slice: the pool of the pod's node's slice", "node-a-10.80.1.0-24", "10.80.1.1", "10.80.1.1", [listing("sliced", ["10.80.1.1/16"])], ["default/mon-a"]],
    ["a NAD of another IPAM: not whereabouts' address", "10.50.0.0-24", "10.50.0.1", "10.50.0.1", [listing("bridge", ["10.50.0.1/24"])], []],
    ["a NAD that is gone: counted in every domain", "10.50.0.0-24", "10.50.0.1", "10.50.0.1", [listing("deleted-nad", ["10.50.0.1/24"])], ["default/mon-a"]],
    ["a NAD whose config cannot be read: counted in every domain", "10.50.0.0-24", "10.50.0.1", "10.50.0.1", [listing("broken", ["10.50.0.1/24"])], ["default/mon-a"]],
    ["the default network (whereabouts may be its IPAM): counted in every domain", "10.50.0.0-24", "10.50.0.1", "10.50.0.1", [{ name: "cluster", interface: "eth0", ips: ["10.50.0.1"], default: true }], ["default/mon-a"]],
    ["an address the pod does not list", "10.50.0.0-24", "10.50.0.2", "10.50.0.2", [listing("storage", ["10.50.0.1/24"])], []]
  ] as const)("%s", (_name, pool, address, reservation, status, expected) => {
    expect(claimants(pool, address, [pod("mon-a", status)], reservation)).toEqual(expected)
  })

  it("a pod that finished, and the entry's own podref, are no claimants", () => {
    const status = [listing("storage", ["10.50.0.1/24"])]
    expect(claimants("10.50.0.0-24", "10.50.0.1", [pod("done", status, { phase: "Succeeded" }), pod("failed", status, { phase: "Failed" })], "10.50.0.1")).toEqual([])
    expect(claimants("10.50.0.0-24", "10.50.0.1", [pod("mon-a", status)], "10.50.0.1", "default/mon-a")).toEqual([])
  })

  it("a Pending pod whose status already lists the address is a claimant (its ADD is done)", () => {
    expect(claimants("10.50.0.0-24", "10.50.0.1", [pod("mon-a", [listing("storage", ["10.50.0.1/24"])], { phase: "Pending" })], "10.50.0.1")).toEqual(["default/mon-a"])
  })

  it("a config edited since the pod's ADD no longer covers the address: counted in every domain", () => {
    expect(claimDomains(pod("mon-a", [listing("storage", ["10.99.0.1/24"])]), ip("10.99.0.1"), sourceOf([]))).toEqual([`ip:${ipKey(ip("10.99.0.1"))}`])
  })

  it("a reservation is claimed by the pods listing its address in its network, its own pod too", () => {
    const pods = [pod("mon-a", [listing("storage", ["10.50.0.1/24"])])]
    expect(reservationClaimants("10.50.0.1", undefined, undefined, sourceOf(pods))).toEqual(["default/mon-a"])
    expect(reservationClaimants("10.50.0.1", undefined, "default/mon-a", sourceOf(pods))).toEqual([])
    expect(reservationClaimants("blue-10.60.0.1", undefined, undefined, sourceOf([pod("g", [listing("green", ["10.60.0.1/24"])])]))).toEqual([])
  })
})

describe("listedIPKeys: the pod cache's index", () => {
  it("every address of every entry, prefixes dropped, IPv6 canonical; nothing for an unreadable status", () => {
    const p = pod("a", [listing("dual", ["10.70.0.1/24", "FD00:70:0::1/64"]), { name: "cluster", ips: ["10.244.0.5"], default: true }])
    expect(listedIPKeys(p)).toEqual([ipKey(ip("10.70.0.1")), ipKey(ip("fd00:70::1")), ipKey(ip("10.244.0.5"))])
    expect(listedIPKeys({ ...p, networkStatus: "[{broken" })).toEqual([])
    expect(listedIPKeys({ ...p, networkStatus: undefined })).toEqual([])
  })
})

describe("separateHeldForAnother: the sweep's orphans without what other listed pods hold", () => {
  it("moves an entry and the reservation of its address out of the orphans; the rest stays", () => {
    const entryOf = (address: string, key: string) => ({ key, ip: ip(address), id: "c1", podref: "default/someone-else", ifname: "net1" })
    const orphans: Orphans = {
      allocations: [
        { pool: "10.50.0.0-24", entry: entryOf("10.50.0.1", "1"), reason: "PodGone" },
        { pool: "10.50.0.0-24", entry: entryOf("10.50.0.2", "2"), reason: "PodGone" }
      ],
      reservations: [{ name: "10.50.0.1", podref: "default/someone-else", ip: ip("10.50.0.1"), networkName: "", reason: "PodGone" }]
    }
    const holding: Holding = {
      podref: "default/someone-else",
      pod: { namespace: "default", name: "someone-else", uid: "" },
      claim: "Orphan",
      trigger: "sweep",
      entries: orphans.allocations.map((o) => ({ pool: o.pool, entry: o.entry, network: "storage", reservation: formatReservation(o.entry.ip) })),
      reservations: [{ name: "10.50.0.1", listed: undefined, ip: ip("10.50.0.1"), orphan: "PodGone" }],
      problems: [],
      ifFreed: [],
      error: undefined
    }
    const mon = pod("mon-a", [listing("storage", ["10.50.0.1/24"])])
    const out = separateHeldForAnother(orphans, [holding], sourceOf([mon]))
    expect(out.heldForAnother.map((h) => `${h.kind} ${h.name} ${h.podref} ${h.claimants.join(",")}`)).toEqual([
      "allocation 10.50.0.0-24 default/someone-else default/mon-a",
      "reservation 10.50.0.1 default/someone-else default/mon-a"
    ])
    expect(out.orphans.allocations.map((o) => o.entry.key)).toEqual(["2"])
    expect(out.orphans.reservations).toEqual([])
    expect(out.holdings.flatMap((h) => h.entries.map((e) => e.entry.key))).toEqual(["2"])
  })
})

const formatReservation = (a: ReturnType<typeof ip>) => reservationName(a, "")

describe("withClaimants: a listing on record as the lister's own elsewhere keeps no one else's entry", () => {
  // A dead pod's entry at 10.50.0.1 in the narrow pool; mon-a lists 10.50.0.1 on the wide network (same unnamed network).
  const entry = (podref: string) => ({ key: "1", ip: ip("10.50.0.1"), id: "c1", podref, ifname: "net1" })
  const poolOf = (name: string, range: string, podref: string): ParsedPool => ({ name, range, cidr: undefined, entries: [entry(podref)], invalid: [] })
  const deadHolding = (reservation: string | undefined): Holding => ({
    podref: "default/dead",
    pod: { namespace: "default", name: "dead", uid: "uid-dead" },
    claim: "Deleted",
    trigger: "deletion",
    entries: [{ pool: "10.50.0.0-24", entry: entry("default/dead"), network: "storage", reservation }],
    reservations: [],
    problems: [],
    ifFreed: [],
    error: undefined
  })
  const claimantsWith = (pools: ReadonlyArray<ParsedPool>, reservations: ReadonlyArray<ReservationRecord>, reservation: string | undefined, network: string) => {
    const mon = pod("mon-a", [listing(network, ["10.50.0.1/16"])])
    const source = claimSource((a) => (listedIPKeys(mon).includes(ipKey(a)) ? [mon] : []), listSnapshot(pools, reservations, NADS))
    return withClaimants([deadHolding(reservation)], source)[0]!.entries[0]!.claimants ?? []
  }
  const dead = poolOf("10.50.0.0-24", "10.50.0.0/24", "default/dead")
  const monsOwn = poolOf("10.50.0.0-16", "10.50.0.0/16", "default/mon-a")
  const reservedFor = (podref: string): ReservationRecord => ({ name: "10.50.0.1", resourceVersion: "1", podref })

  it.each([
    ["its own entry in another pool and the reservation naming it: no claimant", [dead, monsOwn], [reservedFor("default/mon-a")], "10.50.0.1", "wide", []],
    ["the same, listed on a network that cannot be read: no claimant", [dead, monsOwn], [reservedFor("default/mon-a")], "10.50.0.1", "deleted-nad", []],
    ["the reservation naming it, no entry of its own: a claimant", [dead], [reservedFor("default/mon-a")], "10.50.0.1", "wide", ["default/mon-a"]],
    ["its own entry, the reservation naming the dead pod: a claimant", [dead, monsOwn], [reservedFor("default/dead")], "10.50.0.1", "wide", ["default/mon-a"]],
    ["its own entry, no reservation at all: a claimant", [dead, monsOwn], [], "10.50.0.1", "wide", ["default/mon-a"]],
    ["its own entry and reservation, the dead entry's network keeping none, listed where it cannot be read: a claimant", [dead, monsOwn], [reservedFor("default/mon-a")], undefined, "deleted-nad", ["default/mon-a"]]
  ] as const)("%s", (_name, pools, reservations, reservation, network, expected) => {
    expect(claimantsWith(pools, reservations, reservation, network)).toEqual(expected)
  })
})
