import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { type Snapshot, deletedPodHolding, findPodHoldings, mergeFindings, nadIndex, orphanHoldings, pickNad, unseenAfterReads } from "../../src/domain/holdings.ts"
import type { NodeSlicePoolRecord } from "../../src/domain/node-slices.ts"
import { formatIP } from "../../src/domain/ip.ts"
import { listSnapshot } from "./helpers.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { findOrphans } from "../../src/domain/orphans.ts"
import type { PodProjection } from "../../src/domain/pod.ts"
import { type ParsedPool, type ReservationRecord, parsePool, poolName } from "../../src/domain/pool.ts"

const config = (ipam: Record<string, unknown>, type = "macvlan") => JSON.stringify({ cniVersion: "0.3.1", name: "x", type, ipam })

interface World {
  readonly pools?: ReadonlyArray<ParsedPool>
  readonly reservations?: ReadonlyArray<ReservationRecord>
  readonly nads?: Readonly<Record<string, string>>
  readonly nodeSlicePools?: ReadonlyArray<NodeSlicePoolRecord>
}

const snapshotOf = (w: World): Snapshot =>
  listSnapshot(
    w.pools ?? [],
    w.reservations ?? [],
    Object.entries(w.nads ?? {}).map(([key, spec]) => {
      const [namespace, name] = key.split("/") as [string, string]
      return { namespace, name, config: decodeNadConfig(spec) }
    }),
    w.nodeSlicePools ?? []
  )

const pool = (range: string, allocations: Record<string, { id: string; podref: string; ifname?: string }>, network = "") =>
  parsePool({ metadata: { name: poolName(range, network) }, spec: { range, allocations } })

const deleted = (name: string, status: ReadonlyArray<{ name: string; interface: string; ips: ReadonlyArray<string> }> | string, extra: Partial<PodProjection> = {}): PodProjection => ({
  namespace: "ns",
  name,
  uid: `uid-${name}`,
  networkStatus: typeof status === "string" ? status : JSON.stringify([{ name: "cluster", interface: "eth0", ips: ["10.244.0.1"], default: true }, ...status]),
  ...extra
})

/** The holding as plain text. */
const view = (pod: PodProjection, w: World, live: ReadonlyMap<string, ParsedPool> = new Map()) => {
  const s = snapshotOf(w)
  const f = findPodHoldings(pod, s)
  const h = deletedPodHolding(f, live, s)
  return {
    liveReads: [...f.liveReads.keys()],
    entries: h.entries.map((e) => `${e.pool} ${formatIP(e.entry.ip)} ${e.network} ${e.reservation ?? "-"}`),
    reservations: h.reservations.map((r) => `${r.name}${r.listed === undefined ? "" : " (listed)"}`),
    problems: h.problems.map((p) => `${p.reason}: ${p.text}`),
    ifFreed: h.ifFreed.map((e) => `${e.type} ${e.reason}: ${e.message}`),
    error: h.error === undefined ? undefined : `${h.error.reason} retryable=${h.error.retryable}`
  }
}

const NET1 = { "ns/net1": config({ type: "whereabouts", range: "10.1.0.0/24" }) }
/** net1's range with overlapping ranges (reservations) off. */
const OFF = config({ type: "whereabouts", range: "10.1.0.0/24", enable_overlapping_ranges: false })
const P1 = pool("10.1.0.0/24", { "5": { id: "c", podref: "ns/web", ifname: "net1" }, "6": { id: "d", podref: "ns/other", ifname: "net1" } })

describe("findPodHoldings + deletedPodHolding", () => {
  it("through the pod's NAD: its entries, named by the NAD, and their reservations", () => {
    const w: World = { pools: [P1], nads: NET1, reservations: [{ name: "10.1.0.5", resourceVersion: "7", podref: "ns/web" }] }
    expect(view(deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }]), w)).toEqual({
      liveReads: [],
      entries: ["10.1.0.0-24 10.1.0.5 net1 10.1.0.5"],
      reservations: ["10.1.0.5 (listed)"],
      problems: [],
      ifFreed: [],
      error: undefined
    })
  })

  it("a pool the snapshot has not seen is to be read live, and its entries join once read", () => {
    const pod = deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }])
    expect(view(pod, { nads: NET1 })).toMatchObject({ liveReads: ["10.1.0.0-24"], entries: [], reservations: [] })
    expect(view(pod, { nads: NET1 }, new Map([["10.1.0.0-24", P1]]))).toMatchObject({ entries: ["10.1.0.0-24 10.1.0.5 net1 10.1.0.5"], reservations: ["10.1.0.5"] })
  })

  it("a NAD deleted first: found through the podref index, the Event names the NAD the pod's status lists the address on, and a Warning waits for a free", () => {
    const w: World = { pools: [P1], nads: { "other/net1": NET1["ns/net1"] } }
    expect(view(deleted("web", [{ name: "ns/gone", interface: "net1", ips: ["10.1.0.5"] }]), w)).toMatchObject({
      entries: ["10.1.0.0-24 10.1.0.5 gone 10.1.0.5"],
      ifFreed: ["Warning NetworkAttachmentDefinitionNotFound: network-attachment-definition ns/gone not found; freeing the pod's addresses found by podref"]
    })
  })

  it("with no NAD writing the pool any more, the Event names the pool's network, or the pool", () => {
    const named = pool("10.2.0.0/24", { "1": { id: "c", podref: "ns/web" } }, "storage")
    expect(listSnapshot([named, P1], []).eventNetwork(named, "ns")).toBe("storage")
    expect(listSnapshot([named, P1], []).eventNetwork(P1, "ns")).toBe("10.1.0.0-24")
    expect(view(deleted("web", "[]"), { pools: [named] }).entries).toEqual(["storage-10.2.0.0-24 10.2.0.1 storage storage-10.2.0.1"])
  })

  it("enable_overlapping_ranges false: no reservation is looked for", () => {
    const w: World = { pools: [P1], nads: { "ns/net1": OFF } }
    expect(view(deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }]), w)).toMatchObject({ entries: ["10.1.0.0-24 10.1.0.5 net1 -"], reservations: [] })
    // Also for a pool found through the podref index only (the pod's annotation unreadable): the NADs writing it say.
    expect(view(deleted("web", "[{not json"), w)).toMatchObject({ entries: ["10.1.0.0-24 10.1.0.5 net1 -"], reservations: [] })
  })

  it("a pool found only through the podref index, its NAD gone and its reservation not yet in the snapshot: the reservation is still looked for", () => {
    // Named by the pool's network (no NAD left to say): planned unlisted, read live, deleted if it is this pod's.
    const pod = deleted("web", [{ name: "ns/gone", interface: "net1", ips: ["10.1.0.5"] }])
    expect(view(pod, { pools: [P1] })).toMatchObject({ entries: ["10.1.0.0-24 10.1.0.5 gone 10.1.0.5"], reservations: ["10.1.0.5"] })
    const storage = pool("10.2.0.0/24", { "7": { id: "c", podref: "ns/web" } }, "storage")
    expect(view(pod, { pools: [storage], nads: { "other/off": OFF } })).toMatchObject({ reservations: ["storage-10.2.0.7"] })
  })

  it("the pod's NAD turns reservations off while another NAD writing the pool keeps them: looked for (deleted only if this pod's)", () => {
    const w: World = { pools: [P1], nads: { "ns/net1": OFF, "ns/storage": NET1["ns/net1"] } }
    expect(view(deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }]), w)).toMatchObject({ entries: ["10.1.0.0-24 10.1.0.5 net1 10.1.0.5"], reservations: ["10.1.0.5"] })
  })

  it("a reservation the snapshot shows under another podref is planned unlisted: read live, deleted only if it is this pod's by then", () => {
    // The snapshot lags the watch: the previous holder's reservation, deleted, may already have been
    // re-created for this pod (found by the soak: leaked until the next sweep when it was skipped).
    const w: World = { pools: [P1], nads: NET1, reservations: [{ name: "10.1.0.5", resourceVersion: "9", podref: "ns/someone" }] }
    expect(view(deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }]), w).reservations).toEqual(["10.1.0.5"])
    const own: World = { ...w, reservations: [{ name: "10.1.0.5", resourceVersion: "9", podref: "ns/web" }] }
    expect(view(deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }]), own).reservations).toEqual(["10.1.0.5 (listed)"])
  })

  it("non-whereabouts NADs and NADs without ipam are not ours: skipped silently", () => {
    const w: World = { pools: [P1], nads: { ...NET1, "ns/host": config({ type: "host-local", subnet: "10.9.0.0/24" }), "ns/bare": JSON.stringify({ cniVersion: "0.3.1", type: "bridge" }) } }
    const pod = deleted("web", [{ name: "ns/host", interface: "h", ips: ["10.9.0.2"] }, { name: "ns/bare", interface: "b", ips: [] }, { name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }])
    expect(view(pod, w)).toMatchObject({ entries: ["10.1.0.0-24 10.1.0.5 net1 10.1.0.5"], problems: [], error: undefined })
  })

  it("an unreadable annotation skips only itself: one line saying what was wrong, and the podref index still finds the pod's entries", () => {
    expect(view(deleted("web", "[{not json"), { pools: [P1] })).toMatchObject({
      entries: ["10.1.0.0-24 10.1.0.5 10.1.0.0-24 10.1.0.5"],
      error: undefined,
      problems: ["BadAnnotation: cannot read k8s.v1.cni.cncf.io/network-status: not valid JSON (Expected property name or '}' in JSON at position 2 (line 1 column 3))"]
    })
    expect(view(deleted("web", '[{"name":5}]'), { pools: [P1] }).problems).toEqual(["BadAnnotation: cannot read k8s.v1.cni.cncf.io/network-status: [0].name: expected string, got 5"])
  })

  it("a broken NAD config skips only that NAD: the pod's other networks and the podref index still count", () => {
    const w: World = { pools: [P1, pool("10.3.0.0/24", { "1": { id: "c", podref: "ns/web" } })], nads: { "ns/net1": "{not json", "ns/net3": config({ type: "whereabouts", range: "10.3.0.0/24" }) } }
    const pod = deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }, { name: "ns/net3", interface: "net3", ips: ["10.3.0.1"] }])
    expect(view(pod, w)).toMatchObject({
      entries: ["10.3.0.0-24 10.3.0.1 net3 10.3.0.1", "10.1.0.0-24 10.1.0.5 net1 10.1.0.5"],
      error: undefined,
      problems: [expect.stringMatching(/^BadNadConfig: cannot read network-attachment-definition ns\/net1: spec.config is not valid JSON: /)]
    })
  })

  // Tried as a new user would: a pod attached to NAD `broken` got "from network storage", the other
  // NAD writing the same pool. The pod's own status says which network the address came from.
  it("the Event of an entry found by podref names the network the pod's status lists it on, also when its NAD cannot be read", () => {
    const w: World = { pools: [P1], nads: { "ns/broken": "{not json", "ns/storage": config({ type: "whereabouts", range: "10.1.0.0/24" }) } }
    const listed = deleted("web", [{ name: "ns/broken", interface: "net1", ips: ["10.1.0.5/24"] }])
    expect(view(listed, w).entries).toEqual(["10.1.0.0-24 10.1.0.5 broken 10.1.0.5"])
    // Not listed by address (a status from before the ADD): matched by interface.
    expect(view(deleted("web", [{ name: "ns/broken", interface: "net1", ips: [] }]), w).entries).toEqual(["10.1.0.0-24 10.1.0.5 broken 10.1.0.5"])
    // Nothing on the pod says: the NAD that writes the pool.
    expect(view(deleted("web", []), w).entries).toEqual(["10.1.0.0-24 10.1.0.5 storage 10.1.0.5"])
  })

  it("a NAD whose config is empty (it lives on the nodes) or has no ipam is not ours: no problem reported", () => {
    const w: World = { pools: [P1], nads: { "ns/disk": "", "ns/bare": JSON.stringify({ cniVersion: "0.3.1", type: "bridge" }) } }
    expect(view(deleted("web", [{ name: "ns/disk", interface: "d", ips: [] }, { name: "ns/bare", interface: "b", ips: [] }]), w)).toMatchObject({ problems: [], entries: ["10.1.0.0-24 10.1.0.5 10.1.0.0-24 10.1.0.5"] })
  })

  it("two incarnations of one pod merge into one finding: the union of what each names", () => {
    const s = snapshotOf({ pools: [P1], nads: { ...NET1, "ns/net2": config({ type: "whereabouts", range: "10.3.0.0/24" }) } })
    const a = findPodHoldings(deleted("web", [{ name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] }]), s)
    const b = findPodHoldings(deleted("web", [{ name: "ns/net2", interface: "net2", ips: ["10.3.0.1"] }], { uid: "uid-2" }), s)
    const merged = mergeFindings(a, b)
    expect([...merged.pools.keys()]).toEqual(["10.1.0.0-24"])
    expect([...merged.liveReads.keys()]).toEqual(["10.3.0.0-24"])
  })

  // Soak seed 1, p-5474: the pod got its address while the controller's pool watch was down; its
  // deletion arrived before the pool cache caught up, so the cached pool showed nothing of it.
  it("a whereabouts network whose cached pools show none of the pod's entries is unseen (worth a later look); one with them, or whose pool read live shows them, is not", () => {
    const NETS = { ...NET1, "ns/net2": config({ type: "whereabouts", range: "10.3.0.0/24" }), "ns/plain": config({ type: "static" }) }
    const P3 = pool("10.3.0.0/24", { "9": { id: "e", podref: "ns/other", ifname: "net2" } })
    const status = [
      { name: "ns/net1", interface: "net1", ips: ["10.1.0.5"] },
      { name: "ns/net2", interface: "net2", ips: ["10.3.0.1"] },
      { name: "ns/plain", interface: "plain", ips: ["192.168.0.1"] }
    ]
    const s = snapshotOf({ pools: [P1, P3], nads: NETS })
    expect(findPodHoldings(deleted("web", status), s).unseen).toEqual(["ns/net2"])
    // The pool not cached at all is read live instead: seen if the read shows the pod's entries.
    const uncached = findPodHoldings(deleted("web", status), snapshotOf({ pools: [P1], nads: NETS }))
    expect([...uncached.liveReads.keys()]).toEqual(["10.3.0.0-24"])
    expect(unseenAfterReads(uncached, new Map([["10.3.0.0-24", pool("10.3.0.0/24", { "1": { id: "f", podref: "ns/web", ifname: "net2" } })]]))).toEqual([])
    // A live pool without them (the NAD edited to this range after the pod's ADD), or none at all: still unseen.
    expect(unseenAfterReads(uncached, new Map([["10.3.0.0-24", P3]]))).toEqual(["ns/net2"])
    expect(unseenAfterReads(uncached, new Map())).toEqual(["ns/net2"])
    // A network whose NAD is gone names no pools: always looked at again.
    expect(findPodHoldings(deleted("web", [...status, { name: "ns/gone", interface: "net3", ips: ["10.9.0.1"] }]), s).unseen).toEqual(["ns/net2", "ns/gone"])
    // Two incarnations: unseen only where neither showed entries.
    const other = findPodHoldings(deleted("web", [{ name: "ns/net2", interface: "net2", ips: ["10.3.0.1"] }], { uid: "uid-2" }), s)
    expect(mergeFindings(findPodHoldings(deleted("web", status), s), other).unseen).toEqual(["ns/net2"])
    const withEntry = snapshotOf({ pools: [P1, pool("10.3.0.0/24", { "1": { id: "f", podref: "ns/web", ifname: "net2" } })], nads: NETS })
    expect(mergeFindings(findPodHoldings(deleted("web", status), s), findPodHoldings(deleted("web", status, { uid: "uid-2" }), withEntry)).unseen).toEqual([])
  })

  it("without network-status, the networks request names the NADs", () => {
    const pod = { ...deleted("web", "[]"), networkStatus: undefined, networks: "net1@net1" }
    expect(view(pod, { pools: [P1], nads: NET1 }).entries).toEqual(["10.1.0.0-24 10.1.0.5 net1 10.1.0.5"])
  })
})

describe("orphanHoldings", () => {
  it("groups the sweep's orphans by podref, names Events by the NAD that writes the pool, and keeps the listed reservation", () => {
    const pools = [P1]
    const orphans = findOrphans(pools, new Map(), [{ name: "10.1.0.5", podref: "ns/web" }])
    const listed = new Map([["10.1.0.5", { name: "10.1.0.5", resourceVersion: "3", podref: "ns/web" }]])
    const holdings = orphanHoldings(orphans, new Map([[P1.name, P1]]), listed, snapshotOf({ pools, nads: NET1 }))
    expect(holdings.map((h) => [h.podref, h.claim, h.entries.map((e) => `${formatIP(e.entry.ip)} ${e.network} ${e.reservation}`), h.reservations.map((r) => `${r.name} ${r.orphan} ${r.listed?.resourceVersion}`)])).toEqual([
      ["ns/web", "Orphan", ["10.1.0.5 net1 10.1.0.5"], ["10.1.0.5 PodGone 3"]],
      ["ns/other", "Orphan", ["10.1.0.6 net1 10.1.0.6"], []]
    ])
  })

  it("names an entry's reservation by the rule of the deletion path: none where the NADs writing its pool turn them off, the pool's network where no NAD writes it", () => {
    const reservationsOf = (nads: Readonly<Record<string, string>>) =>
      orphanHoldings(findOrphans([P1], new Map(), []), new Map([[P1.name, P1]]), new Map(), snapshotOf({ pools: [P1], nads })).flatMap((h) => h.entries.map((e) => e.reservation))
    expect(reservationsOf({ "ns/net1": OFF })).toEqual([undefined, undefined])
    expect(reservationsOf({})).toEqual(["10.1.0.5", "10.1.0.6"])
  })
})

describe("pickNad", () => {
  it("prefers a NAD in the pod's namespace, else the first by namespace/name", () => {
    const candidates = [{ namespace: "b", name: "z" }, { namespace: "a", name: "y" }, { namespace: "ns", name: "x" }]
    expect(pickNad(candidates, "ns")).toBe("x")
    expect(pickNad(candidates, "other")).toBe("y")
    expect(pickNad(undefined, "ns")).toBeUndefined()
  })

  it("the index maps every range of a whereabouts NAD, named networks included", () => {
    const index = nadIndex([{ namespace: "ns", name: "dual", config: decodeNadConfig(config({ type: "whereabouts", network_name: "n", ipRanges: [{ range: "10.0.0.0/24" }, { range: "fd00::/120" }] })) }])
    expect([...index.rangePools.keys()]).toEqual(["n-10.0.0.0-24", "n-fd00---120"])
    expect(Either.isRight(decodeNadConfig(config({ type: "whereabouts", range: "10.0.0.0/24" })))).toBe(true)
  })
})
