import { describe, expect, it } from "@effect/vitest"
import type { Snapshot } from "../../src/domain/holdings.ts"
import { formatIP } from "../../src/domain/ip.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { namedHoldings } from "../../src/domain/operator-release.ts"
import { type ParsedPool, type ReservationRecord, parsePool, poolName } from "../../src/domain/pool.ts"
import { ip, listSnapshot } from "./helpers.ts"

const pool = (range: string, allocations: Record<string, { id: string; podref: string; ifname?: string }>, network = "") =>
  parsePool({ metadata: { name: poolName(range, network) }, spec: { range, allocations } })

const nad = (name: string, range: string, network?: string) => ({
  namespace: "ns",
  name,
  config: decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name, type: "macvlan", ipam: { type: "whereabouts", range, ...(network === undefined ? {} : { network_name: network }) } }))
})

const snapshotOf = (pools: ReadonlyArray<ParsedPool>, reservations: ReadonlyArray<ReservationRecord>): Snapshot =>
  listSnapshot(pools, reservations, [nad("net1", "10.1.0.0/24"), nad("blue", "10.2.0.0/24", "blue")])

const pools = [
  pool("10.1.0.0/24", { "2": { id: "c2", podref: "ns/a", ifname: "net1" }, "3": { id: "c3", podref: "ns/b", ifname: "net1" } }),
  pool("10.2.0.0/24", { "5": { id: "c5", podref: "ns/a", ifname: "net2" } }, "blue")
]
const reservations: ReadonlyArray<ReservationRecord> = [
  { name: "10.1.0.2", podref: "ns/a", resourceVersion: "1" },
  { name: "blue-10.2.0.5", podref: "ns/a", resourceVersion: "2" },
  { name: "10.1.0.3", podref: "ns/someone-else", resourceVersion: "3" },
  { name: "10.1.0.99", podref: "ns/a", resourceVersion: "4" }
]
const snapshot = snapshotOf(pools, reservations)
const view = (r: ReturnType<typeof namedHoldings>) =>
  r.holdings.map((h) => ({
    podref: h.podref,
    claim: h.claim,
    force: h.operator?.force,
    entries: h.entries.map((e) => `${e.pool} ${formatIP(e.entry.ip)} (${e.network})`),
    reservations: h.reservations.map((x) => x.name)
  }))

describe("namedHoldings", () => {
  it("--pod: every address the podref holds in any pool, and its reservations (by podref and by address), each Event naming the NAD", () => {
    const r = namedHoldings({ pods: [{ namespace: "ns", name: "a" }], ips: [], force: false }, snapshot)
    expect(r.skipped).toEqual([])
    expect(view(r)).toEqual([
      {
        podref: "ns/a",
        claim: "Operator",
        force: false,
        entries: ["10.1.0.0-24 10.1.0.2 (net1)", "blue-10.2.0.0-24 10.2.0.5 (blue)"],
        reservations: ["10.1.0.2", "blue-10.2.0.5", "10.1.0.99"]
      }
    ])
  })

  it("--ip: one address and its reservation; another pod's reservation of the address is left out", () => {
    expect(view(namedHoldings({ pods: [], ips: [{ pool: "10.1.0.0-24", ip: ip("10.1.0.3") }], force: true }, snapshot))).toEqual([
      { podref: "ns/b", claim: "Operator", force: true, entries: ["10.1.0.0-24 10.1.0.3 (net1)"], reservations: [] }
    ])
  })

  it("--ip under a NAD that turned overlapping ranges off: the reservation kept from before is still freed with its entry", () => {
    const off = listSnapshot(pools, reservations, [{ ...nad("net1", "10.1.0.0/24"), config: decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name: "net1", type: "macvlan", ipam: { type: "whereabouts", range: "10.1.0.0/24", enable_overlapping_ranges: false } })) }])
    expect(view(namedHoldings({ pods: [], ips: [{ pool: "10.1.0.0-24", ip: ip("10.1.0.2") }], force: false }, off))).toEqual([
      { podref: "ns/a", claim: "Operator", force: false, entries: ["10.1.0.0-24 10.1.0.2 (net1)"], reservations: ["10.1.0.2"] }
    ])
  })

  it("one holding per podref however it was named, each entry once", () => {
    const r = namedHoldings({ pods: [{ namespace: "ns", name: "a" }], ips: [{ pool: "10.1.0.0-24", ip: ip("10.1.0.2") }, { pool: "10.1.0.0-24", ip: ip("10.1.0.2") }], force: false }, snapshot)
    expect(view(r).map((h) => [h.podref, h.entries.length, h.reservations.length])).toEqual([["ns/a", 2, 3]])
  })

  it("what holds nothing is skipped with the reason", () => {
    const r = namedHoldings(
      { pods: [{ namespace: "ns", name: "nobody" }], ips: [{ pool: "10.9.0.0-24", ip: ip("10.9.0.1") }, { pool: "10.1.0.0-24", ip: ip("10.1.0.77") }], force: false },
      snapshot
    )
    expect(r.holdings).toEqual([])
    expect(r.skipped.map((s) => `${s.kind} ${s.name} ${s.ip ?? "-"} ${s.podref || "-"}: ${s.why}`)).toEqual([
      "pod  - ns/nobody: pod ns/nobody holds no address in these pools",
      "allocation 10.9.0.0-24 10.9.0.1 -: no pool 10.9.0.0-24",
      "allocation 10.1.0.0-24 10.1.0.77 -: pool 10.1.0.0-24 holds no allocation of 10.1.0.77"
    ])
  })
})
