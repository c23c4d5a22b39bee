import { describe, expect, it } from "@effect/vitest"
import { type AuditReport, decodeAuditReport, matchReport } from "../../src/domain/audit-report.ts"
import { type Snapshot, orphanHoldings } from "../../src/domain/holdings.ts"
import { formatIP } from "../../src/domain/ip.ts"
import { findOrphans } from "../../src/domain/orphans.ts"
import type { PodProjection } from "../../src/domain/pod.ts"
import { type ParsedPool, type ReservationRecord, parsePool, poolName } from "../../src/domain/pool.ts"
import { left, listSnapshot, right } from "./helpers.ts"

const pool = (range: string, allocations: Record<string, { id: string; podref: string; ifname?: string }>) =>
  parsePool({ metadata: { name: poolName(range, "") }, spec: { range, allocations } })

const snapshotOf = (pools: ReadonlyArray<ParsedPool>, reservations: ReadonlyArray<ReservationRecord>): Snapshot => listSnapshot(pools, reservations)

/** The world now: pools, reservations and live pods, with the sweep's orphans of it. */
const now = (pools: ReadonlyArray<ParsedPool>, reservations: ReadonlyArray<ReservationRecord>, pods: ReadonlyArray<PodProjection> = []) => {
  const live = new Map(pods.map((p) => [`${p.namespace}/${p.name}`, p] as const))
  const orphans = findOrphans(pools, live, reservations)
  const listed = new Map(reservations.map((r) => [r.name, r] as const))
  return {
    pools: new Map(pools.map((p) => [p.name, p] as const)),
    reservations: listed,
    pods: live,
    orphans: orphanHoldings(orphans, new Map(pools.map((p) => [p.name, p] as const)), listed, snapshotOf(pools, reservations), live)
  }
}

const allocation = (ip: string, podref: string, extra: Partial<AuditReport["orphanedAllocations"][number]> = {}) => ({ pool: "10.1.0.0-24", ip, podref, ...extra })
const report = (allocations: AuditReport["orphanedAllocations"], reservations: AuditReport["orphanedReservations"] = []): AuditReport => ({
  orphanedAllocations: allocations,
  orphanedReservations: reservations
})
const reservation = (name: string, podref: string): ReservationRecord => ({ name, podref, resourceVersion: "1" })

describe("decodeAuditReport", () => {
  it("reads what audit --output json prints, other fields ignored", () => {
    const text = JSON.stringify({
      pools: [{ name: "10.1.0.0-24" }],
      staleSlicePools: [],
      orphanedAllocations: [{ pool: "10.1.0.0-24", ip: "10.1.0.2", offset: "2", podref: "ns/a", containerId: "c1", ifname: "net1", reason: "PodGone", explanation: "…" }],
      orphanedReservations: [{ name: "10.1.0.2", ip: "10.1.0.2", network: null, podref: "ns/a", reason: "PodGone", explanation: "…" }]
    })
    expect(right(decodeAuditReport(text))).toEqual({
      orphanedAllocations: [{ pool: "10.1.0.0-24", ip: "10.1.0.2", offset: "2", podref: "ns/a", containerId: "c1", ifname: "net1" }],
      orphanedReservations: [{ name: "10.1.0.2", ip: "10.1.0.2", podref: "ns/a" }]
    })
  })

  it.each([
    ["", "is empty (expected the JSON that audit --output json prints)"],
    ["POOL   RANGE\n10.1.0.0-24   10.1.0.0/24", "is not JSON ("],
    ["\n> whereabouts-controller@0.1.0 audit\n> node src/programs/main.ts audit --output json\n\n{}", "npm run prints a banner on stdout: use npm run -s"],
    ["[]", "is not an audit report"],
    [JSON.stringify({ orphanedReservations: [] }), "orphanedAllocations is missing"],
    [JSON.stringify({ orphanedAllocations: [{ pool: "p", ip: "10.1.0.x", podref: "ns/a" }], orphanedReservations: [] }), 'orphanedAllocations[0].ip "10.1.0.x" is not an IP address'],
    [JSON.stringify({ orphanedAllocations: [{ pool: "", ip: "10.1.0.1", podref: "ns/a" }], orphanedReservations: [] }), "orphanedAllocations[0].pool is empty"],
    [JSON.stringify({ orphanedAllocations: [], orphanedReservations: [{ name: "x" }] }), "orphanedReservations[0].podref is missing"]
  ])("refuses %j with one line naming what is wrong", (text, message) => {
    const why = left(decodeAuditReport(text))
    expect(why).toContain(message)
    expect(why).not.toContain("\n")
  })
})

describe("matchReport", () => {
  const pools = [pool("10.1.0.0/24", { "2": { id: "c2", podref: "ns/a", ifname: "net1" }, "3": { id: "c3", podref: "ns/b", ifname: "net1" } })]

  it("an entry still the report's and still an orphan: handed on as an operator's release, with its reservation", () => {
    const m = matchReport(report([allocation("10.1.0.2", "ns/a", { offset: "2", containerId: "c2", ifname: "net1" })], [{ name: "10.1.0.2", podref: "ns/a" }]), now(pools, [reservation("10.1.0.2", "ns/a")]))
    expect(m.skipped).toEqual([])
    expect(m.holdings.map((h) => [h.podref, h.claim, h.operator, h.entries.map((e) => formatIP(e.entry.ip)), h.reservations.map((r) => r.name)])).toEqual([
      ["ns/a", "Orphan", { force: false }, ["10.1.0.2"], ["10.1.0.2"]]
    ])
  })

  it("exactly what the report lists: another orphan of the same pool stays", () => {
    const m = matchReport(report([allocation("10.1.0.2", "ns/a")]), now(pools, []))
    expect(m.holdings.flatMap((h) => h.entries.map((e) => formatIP(e.entry.ip)))).toEqual(["10.1.0.2"])
  })

  // Already free: the report's holder holds it no more, whoever freed it (a retried release is done).
  // Still held: its podref holds it still, changed since the report.
  it.each([
    ["the pool is gone", allocation("10.9.0.2", "ns/a", { pool: "10.9.0.0-24" }), "already freed: pool 10.9.0.0-24 no longer exists", true],
    ["already freed", allocation("10.1.0.7", "ns/a"), "already freed: pool 10.1.0.0-24 holds no allocation of 10.1.0.7", true],
    ["another podref now", allocation("10.1.0.3", "ns/a"), "already freed: 10.1.0.3 now belongs to ns/b", true],
    ["re-ADDed (another container id)", allocation("10.1.0.2", "ns/a", { containerId: "old" }), "changed since the report: container id c2 (was old): a pod of that name took it back", false],
    ["another offset (the range changed)", allocation("10.1.0.2", "ns/a", { offset: "7" }), "changed since the report: 10.1.0.2 is now at offset 2 (was 7)", false],
    ["another interface", allocation("10.1.0.2", "ns/a", { ifname: "net2" }), "changed since the report: interface net1 (was net2)", false]
  ])("skipped, with the reason: %s", (_, entry, why, free) => {
    const m = matchReport(report([entry]), now(pools, []))
    expect(m.holdings).toEqual([])
    expect(m.skipped.map((s) => [s.why, s.result === "already free"])).toEqual([[why, free]])
  })

  it("the same entry, but a pod of that name exists again and may hold it: no longer an orphan", () => {
    const reborn: PodProjection = { namespace: "ns", name: "a", uid: "u2", phase: "Pending" }
    const m = matchReport(report([allocation("10.1.0.2", "ns/a")], [{ name: "10.1.0.2", podref: "ns/a" }]), now(pools, [reservation("10.1.0.2", "ns/a")], [reborn]))
    expect(m.holdings).toEqual([])
    expect(m.skipped.map((s) => `${s.kind} ${s.name}: ${s.why}`)).toEqual([
      "allocation 10.1.0.0-24: no longer an orphan: pod ns/a (uid u2) exists and may hold it",
      "reservation 10.1.0.2: no longer an orphan: pod ns/a (uid u2) exists and may hold it"
    ])
    expect(m.skipped.some((s) => s.result === "already free")).toBe(false)
  })

  it("reservations: already deleted and now another pod's are already free; one whose address stays allocated is skipped", () => {
    const listed = [reservation("10.1.0.2", "ns/a"), reservation("10.1.0.5", "ns/other")]
    const m = matchReport(
      report([], [
        { name: "10.1.0.9", podref: "ns/a" },
        { name: "10.1.0.5", podref: "ns/a" },
        { name: "10.1.0.2", podref: "ns/a" }
      ]),
      now(pools, listed)
    )
    expect(m.holdings).toEqual([])
    expect(m.skipped.map((s) => `${s.result === "already free" ? "free" : "held"} ${s.name}: ${s.why}`)).toEqual([
      "free 10.1.0.9: already deleted: no reservation 10.1.0.9",
      "free 10.1.0.5: already freed: reservation 10.1.0.5 now belongs to ns/other",
      "held 10.1.0.2: its address 10.1.0.2 stays allocated in pool 10.1.0.0-24 (not released from this report)"
    ])
  })

  it("an entry listed twice is released once", () => {
    const m = matchReport(report([allocation("10.1.0.2", "ns/a"), allocation("10.1.0.2", "ns/a")]), now(pools, []))
    expect(m.holdings.flatMap((h) => h.entries.map((e) => e.entry.key))).toEqual(["2"])
  })
})
