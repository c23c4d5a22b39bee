import { describe, expect, it } from "@effect/vitest"
import { formatIP } from "../../src/domain/ip.ts"
import { type Orphans, findOrphans } from "../../src/domain/orphans.ts"
import type { PodProjection } from "../../src/domain/pod.ts"
import { parsePool, poolName, reservationName } from "../../src/domain/pool.ts"
import { ip } from "./helpers.ts"

const pool = (range: string, allocations: Record<string, unknown>, network = "") =>
  parsePool({ metadata: { name: poolName(range, network) }, spec: { range, allocations } })

const at = (podref: string, ifname = "net1") => ({ id: `c-${podref}`, podref, ifname })

/** A running pod whose network-status lists `ips` on net1 (and a default network). */
const live = (ref: string, ips: ReadonlyArray<string>, extra: Partial<PodProjection> = {}): [string, PodProjection] => {
  const [namespace, name] = ref.split("/") as [string, string]
  const networkStatus = JSON.stringify([
    { name: "k8s-pod-network", interface: "eth0", ips: ["10.244.0.9"], default: true },
    { name: `${namespace}/nad`, interface: "net1", ips }
  ])
  return [ref, { namespace, name, uid: `uid-${name}`, phase: "Running", networkStatus, ...extra }]
}

const reservation = (name: string, podref: string) => ({ name, podref })

/** Orphans as plain text, easy to compare. */
const view = (o: Orphans) => ({
  allocations: o.allocations.map((a) => [a.pool, a.entry.key, a.entry.podref, a.reason]),
  reservations: o.reservations.map((r) => [r.name, r.networkName, r.ip === undefined ? undefined : formatIP(r.ip), r.reason])
})

describe("findOrphans: allocations", () => {
  it("a dead pod's allocation is an orphan (PodGone)", () => {
    const pools = [pool("10.0.0.0/24", { "5": at("ns/dead"), "6": at("ns/alive") })]
    expect(view(findOrphans(pools, new Map([live("ns/alive", ["10.0.0.6"])])))).toStrictEqual({
      allocations: [["10.0.0.0-24", "5", "ns/dead", "PodGone"]],
      reservations: []
    })
  })

  it("a live pod that lists the IP keeps it", () => {
    const pools = [pool("10.0.0.0/24", { "5": at("ns/p") }), pool("fd00::/64", { "5": at("ns/p") })]
    expect(view(findOrphans(pools, new Map([live("ns/p", ["10.0.0.5", "FD00:0:0::5"])])))).toStrictEqual({ allocations: [], reservations: [] })
  })

  it("same podref under two offsets, the pod holds one: only the other is an orphan (IPNotOnPod)", () => {
    const pools = [pool("10.0.0.0/24", { "5": at("ns/p"), "9": at("ns/p") })]
    expect(view(findOrphans(pools, new Map([live("ns/p", ["10.0.0.5"])]))).allocations).toStrictEqual([
      ["10.0.0.0-24", "9", "ns/p", "IPNotOnPod"]
    ])
  })

  it.each([
    ["pending without status", { phase: "Pending", networkStatus: undefined }],
    ["running without status", { networkStatus: undefined }],
    ["unreadable status", { networkStatus: "[{" }]
  ])("a live pod %s keeps its addresses", (_, extra) => {
    const pools = [pool("10.0.0.0/24", { "5": at("ns/p") })]
    expect(findOrphans(pools, new Map([live("ns/p", [], extra)])).allocations).toStrictEqual([])
  })

  it("carries the pool name and ignores invalid entries", () => {
    const pools = [pool("10.0.0.0/24", { "5": at("ns/dead"), "x": at("ns/dead") }, "blue"), pool("10.0.1.0/24", {})]
    expect(view(findOrphans(pools, new Map())).allocations).toStrictEqual([["blue-10.0.0.0-24", "5", "ns/dead", "PodGone"]])
  })
})

describe("findOrphans: overlapping-range reservations", () => {
  const pools = [
    pool("10.0.0.0/24", { "5": at("ns/p"), "6": at("ns/p"), "7": at("ns/q") }),
    pool("10.0.0.0/24", { "5": at("ns/p") }, "my-net"),
    pool("2001:db8::/64", { "5": at("ns/p") }),
    pool("2001:db8::/64", { "5": at("ns/p") }, "dead-beef")
  ]
  const pods = new Map([live("ns/p", ["10.0.0.5", "2001:db8::5"]), live("ns/q", ["10.0.0.7"])])
  const check = (name: string, podref: string) => view(findOrphans(pools, pods, [reservation(name, podref)])).reservations

  it.each([
    ["held, unnamed IPv4", "10.0.0.5", "ns/p"],
    ["held, named network", "my-net-10.0.0.5", "ns/p"],
    ["held, IPv6", "2001-db8--5", "ns/p"],
    ["held, IPv6 on a network whose name has dashes (and reads as IPv6 too)", "dead-beef-2001-db8--5", "ns/p"],
    ["held by another live pod", "10.0.0.7", "ns/q"]
  ])("%s: kept", (_, name, podref) => {
    expect(check(name, podref)).toStrictEqual([])
  })

  it.each([
    ["dead pod", "10.0.0.5", "ns/dead", ["10.0.0.5", "", "10.0.0.5", "PodGone"]],
    ["dead pod, unreadable name", "not-an-ip", "ns/dead", ["not-an-ip", undefined, undefined, "PodGone"]],
    ["live pod, no allocation holds the IP", "10.0.0.9", "ns/p", ["10.0.0.9", "", "10.0.0.9", "NoAllocation"]],
    ["live pod, the IP is another pod's", "10.0.0.7", "ns/p", ["10.0.0.7", "", "10.0.0.7", "NoAllocation"]],
    ["live pod, IPv6 not allocated", "2001-db8--9", "ns/p", ["2001-db8--9", "", "2001:db8::9", "NoAllocation"]],
    ["live pod, allocated in another network only", "my-net-10.0.0.7", "ns/q", ["my-net-10.0.0.7", "my-net", "10.0.0.7", "NoAllocation"]],
    ["allocation itself orphaned", "10.0.0.6", "ns/p", ["10.0.0.6", "", "10.0.0.6", "IPNotOnPod"]]
  ])("%s", (_, name, podref, expected) => {
    expect(check(name, podref)).toStrictEqual([expected])
  })

  it("an address two podrefs hold in one network (two pools overlap): each one's reservation judged by its own allocation; held wins over orphaned", () => {
    const shared = [
      pool("10.0.0.0/24", { "5": at("ns/p"), "6": at("ns/r") }),
      pool("10.0.0.0/28", { "5": at("ns/r"), "6": at("ns/r") }),
      pool("10.0.0.0/29", { "6": at("ns/r") })
    ]
    const both = new Map([live("ns/p", ["10.0.0.5"]), live("ns/r", ["10.0.0.6"])])
    const judge = (name: string, podref: string) => view(findOrphans(shared, both, [reservation(name, podref)])).reservations
    expect(judge("10.0.0.5", "ns/p")).toStrictEqual([])
    expect(judge("10.0.0.5", "ns/r")).toStrictEqual([["10.0.0.5", "", "10.0.0.5", "IPNotOnPod"]])
    expect(judge("10.0.0.6", "ns/r")).toStrictEqual([])
    expect(judge("10.0.0.5", "ns/q")).toStrictEqual([["10.0.0.5", "", "10.0.0.5", "PodGone"]])
  })

  it("a live pod's reservation with an unreadable name is never reported", () => {
    expect(check("not-an-ip", "ns/p")).toStrictEqual([])
  })

  it("reads the names reservationName writes", () => {
    const names = [reservationName(ip("10.0.0.5"), ""), reservationName(ip("2001:db8::5"), "dead-beef"), reservationName(ip("10.0.0.9"), "my-net")]
    const found = findOrphans(pools, pods, names.map((n) => reservation(n, "ns/p")))
    expect(view(found).reservations).toStrictEqual([["my-net-10.0.0.9", "my-net", "10.0.0.9", "NoAllocation"]])
  })
})
