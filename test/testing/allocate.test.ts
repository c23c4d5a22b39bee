import { describe, expect, it } from "@effect/vitest"
import { type Allocations, assignIP, releaseById, releaseByPodref, withAssignment } from "../../src/testing/allocate.ts"
import { type Cidr, type IPAddress, formatIP } from "../../src/domain/ip.ts"
import type { IpRange } from "../../src/domain/ipam-config.ts"
import { cidr, ip, ipRange, left, right } from "../domain/helpers.ts"

const request = { id: "new-container", podref: "ns/new", ifname: "net1" }

/** `count` allocations at consecutive offsets from `from`, each of its own pod. */
const taken = (from: number, count: number): Allocations =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [String(from + i), { id: `c${from + i}`, podref: `ns/p${from + i}`, ifname: "net1" }]))

const assign = (r: IpRange, allocations: Allocations = {}, alsoReserved: ReadonlyArray<IPAddress> = [], pool: Cidr = r.cidr) =>
  assignIP(r, pool, allocations, request, alsoReserved)

const assigned = (...args: Parameters<typeof assign>): string => formatIP(right(assign(...args)).ip)

describe("assignIP: lowest free address", () => {
  it.each([
    ["empty /24 → first usable, never the network", ipRange("10.0.0.0/24"), {}, "10.0.0.1"],
    ["skips reserved offsets", ipRange("10.0.0.0/24"), taken(1, 3), "10.0.0.4"],
    ["fills a hole", ipRange("10.0.0.0/24"), { ...taken(1, 2), ...taken(4, 2) }, "10.0.0.3"],
    ["last usable, never the broadcast", ipRange("10.0.0.0/24"), taken(1, 253), "10.0.0.254"],
    ["range_start inside the usable range", ipRange("10.0.0.0/24", { start: "10.0.0.10" }), {}, "10.0.0.10"],
    ["range_start = network address is ignored", ipRange("10.0.0.0/24", { start: "10.0.0.0" }), {}, "10.0.0.1"],
    ["range_start outside the CIDR is ignored", ipRange("10.0.0.0/24", { start: "10.0.1.5" }), {}, "10.0.0.1"],
    ["range_start of the other family is ignored", ipRange("10.0.0.0/24", { start: "fd00::5" }), {}, "10.0.0.1"],
    ["range_end = broadcast is ignored", ipRange("10.0.0.0/24", { end: "10.0.0.255" }), taken(1, 253), "10.0.0.254"],
    ["end below start: the end is ignored", ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.5" }), taken(10, 200), "10.0.0.210"],
    ["start-cidr form bounds", ipRange("192.168.1.0/24", { start: "192.168.1.5", end: "192.168.1.25" }), taken(5, 20), "192.168.1.25"],
    ["jumps over an excluded subnet", ipRange("10.0.0.0/24", { exclude: ["10.0.0.0/28"] }), {}, "10.0.0.16"],
    ["excluded /32", ipRange("10.0.0.0/24", { exclude: ["10.0.0.1"] }), {}, "10.0.0.2"],
    ["adjacent exclusions", ipRange("10.0.0.0/24", { exclude: ["10.0.0.16/28", "10.0.0.0/28"] }), {}, "10.0.0.32"],
    ["exclusion then reservation", ipRange("10.0.0.0/24", { exclude: ["10.0.0.0/28"] }), taken(16, 2), "10.0.0.18"],
    ["exclusion of the other family is ignored", ipRange("10.0.0.0/24", { exclude: ["::/0"] }), {}, "10.0.0.1"],
    ["IPv6 /64", ipRange("2001:db8::/64"), {}, "2001:db8::1"],
    ["IPv6 skips reserved", ipRange("2001:db8::/64"), taken(1, 2), "2001:db8::3"],
    ["IPv6 last usable, never the last address", ipRange("2001:db8::/120"), taken(1, 253), "2001:db8::fe"],
    ["IPv6 excluded /124", ipRange("fd00::/120", { exclude: ["fd00::/124", "fd00::10"] }), {}, "fd00::11"],
    ["IPv6 range_start", ipRange("fd00::/64", { start: "fd00::1:0" }), {}, "fd00::1:0"]
  ])("%s", (_, r, allocations, expected) => {
    expect(assigned(r, allocations)).toBe(expected)
  })

  it("counts pool keys from spec.range as written", () => {
    const r = ipRange("10.0.0.0/24", { start: "10.0.0.5" })
    const result = right(assign(r, { "0": { id: "c", podref: "ns/a" } }, [], cidr("10.0.0.5/24")))
    expect(formatIP(result.ip)).toBe("10.0.0.6")
    expect(result.key).toBe("1")
  })

  it("skips alsoReserved addresses (overlapping-range reservations)", () => {
    expect(assigned(ipRange("10.0.0.0/24"), {}, [ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.9")])).toBe("10.0.0.3")
  })

  it("records the new entry under its offset and keeps the others", () => {
    const before = taken(1, 2)
    const result = right(assign(ipRange("10.0.0.0/24"), before))
    expect(result).toMatchObject({ key: "3", existing: false })
    expect(withAssignment(before, result)).toStrictEqual({ ...before, "3": { id: "new-container", podref: "ns/new", ifname: "net1" } })
    expect(before).toStrictEqual(taken(1, 2))
  })

  it("a /30 has two usable addresses, then it is exhausted", () => {
    const r = ipRange("10.0.0.0/30")
    const first = right(assignIP(r, r.cidr, {}, { id: "a", podref: "ns/a", ifname: "net1" }))
    const afterFirst = withAssignment({}, first)
    const second = right(assignIP(r, r.cidr, afterFirst, { id: "b", podref: "ns/b", ifname: "net1" }))
    expect([formatIP(first.ip), formatIP(second.ip)]).toStrictEqual(["10.0.0.1", "10.0.0.2"])
    const error = left(assignIP(r, r.cidr, withAssignment(afterFirst, second), { id: "c", podref: "ns/c", ifname: "net1" }))
    expect(error._tag).toBe("AssignmentError")
    expect(error.range).toBe("10.0.0.0/30")
  })

  it.each([
    ["10.0.0.0/31", {}],
    ["10.0.0.5/32", {}],
    ["2001:db8::/127", {}],
    ["2001:db8::1/128", {}],
    ["10.0.0.0/24", { exclude: ["10.0.0.0/24"] }],
    ["10.0.0.0/24", { exclude: ["10.0.0.0/16"] }],
    ["10.0.0.0/24", { start: "10.0.0.250", end: "10.0.0.252", exclude: ["10.0.0.248/29"] }],
    ["fd00::/126", { exclude: ["fd00::1", "fd00::2"] }]
  ] as const)("%s %j has nothing to give → AssignmentError", (range, opts) => {
    const error = left(assign(ipRange(range, opts)))
    expect(error._tag).toBe("AssignmentError")
    expect(error.message).toContain(ipRange(range).range)
  })

  it("exhaustion by reservations inside range bounds", () => {
    const r = ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.12" })
    expect(left(assign(r, taken(10, 2), [ip("10.0.0.12")]))._tag).toBe("AssignmentError")
  })
})

describe("assignIP: keys as the pool holds them", () => {
  const entry = (podref: string) => ({ id: `c-${podref}`, podref, ifname: "net1" })

  it.each(["01", "1.0", "1e0", "+1", " 1", "-1", "0x1", "abc"])("the key %j is not offset 1: it reserves nothing", (key) => {
    expect(assigned(ipRange("10.0.0.0/24"), { [key]: entry("ns/odd") })).toBe("10.0.0.1")
  })

  it("offsets past 2^32 (not array indices in JS) are read as reserved", () => {
    // rangeStart 2^32 past the pool's address: every key is a plain string property, not an element.
    const r = ipRange("fd00::/64", { start: "fd00::1:0:0" })
    const allocations = { "4294967296": entry("ns/a"), "4294967297": entry("ns/b"), "4294967299": entry("ns/c") }
    expect(assigned(r, allocations)).toBe("fd00::1:0:2")
  })

  it("a run of allocations, then an exclusion, then alsoReserved, then the answer", () => {
    const r = ipRange("10.0.0.0/24", { exclude: ["10.0.0.8/30"] })
    expect(assigned(r, taken(1, 7), [ip("10.0.0.12"), ip("10.0.0.14")], r.cidr)).toBe("10.0.0.13")
  })

  it("the pod's own entry under a key that is not an offset does not count as its address", () => {
    const r = ipRange("10.0.0.0/24")
    const allocations = { ...taken(1, 2), "07": { id: "old", podref: "ns/new", ifname: "net1" }, "9": { id: "old", podref: "ns/new", ifname: "net1" } }
    expect(right(assignIP(r, r.cidr, allocations, request))).toMatchObject({ key: "9", existing: true })
    expect(right(assignIP(r, r.cidr, { ...taken(1, 2), "07": allocations["07"] }, request))).toMatchObject({ key: "3", existing: false })
  })
})

describe("assignIP: wide ranges (beyond 2^53)", () => {
  // 2001:db8::/68 covers offsets 0 … 2^60 - 1 of the /64; the sweep must continue in BigInt.
  const r = ipRange("2001:db8::/64", { exclude: ["2001:db8::/68"] })
  const at = (offset: bigint) => ({ [offset.toString()]: { id: "x", podref: "ns/x", ifname: "net1" } })

  it.each([
    ["the first address after the exclusion", {}, [], "2001:db8:0:0:1000::"],
    ["a reserved offset beyond 2^53", at(1n << 60n), [], "2001:db8::1000:0:0:1"],
    ["an alsoReserved address beyond 2^53", {}, [ip("2001:db8::1000:0:0:0")], "2001:db8::1000:0:0:1"],
    ["reserved offsets and a second exclusion", { ...at(1n << 60n), ...at((1n << 60n) + 1n) }, [], "2001:db8::1000:0:0:2"]
  ] as const)("%s", (_, allocations, also, expected) => {
    expect(assigned(r, allocations, also)).toBe(expected)
  })

  it("a second exclusion right after reserved far offsets", () => {
    const wide = ipRange("2001:db8::/64", { exclude: ["2001:db8::/68", "2001:db8::1000:0:0:4/126"] })
    const allocations = { ...at(1n << 60n), ...at((1n << 60n) + 1n), ...at((1n << 60n) + 2n), ...at((1n << 60n) + 3n) }
    expect(assigned(wide, allocations)).toBe("2001:db8::1000:0:0:8")
  })

  it("a /48 reads offsets past 2^64 (which upstream cannot write) as reserved", () => {
    const r48 = ipRange("2001:db8::/48", { start: "2001:db8:0:1::" })
    expect(assigned(r48, at(1n << 64n))).toBe("2001:db8:0:1::1")
  })
})

describe("assignIP: big pools (one walk, or the scan when the walk cannot settle)", () => {
  const r = ipRange("10.20.0.0/16")
  const own = (id: string) => ({ id, podref: "ns/new", ifname: "net1" })

  it("a dense pool: the free address past every entry, or the pod's own entry deep inside", () => {
    expect(assigned(r, taken(1, 5000))).toBe("10.20.19.137")
    expect(right(assign(r, { ...taken(1, 5000), "4000": own("old") }))).toMatchObject({ key: "4000", existing: true })
  })

  it("a pool with many small holes: the lowest hole, and the pod's entry past the holes", () => {
    const holey = Object.fromEntries(Object.entries(taken(1, 6000)).filter(([k]) => Number(k) % 4 !== 0))
    expect(assigned(r, holey)).toBe("10.20.0.4")
    expect(right(assign(r, { ...holey, "5999": own("old") }))).toMatchObject({ key: "5999", existing: true })
  })

  it("a sparse pool (the walk gives up): the lowest free address, and the pod's entry at the far end", () => {
    const sparse = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [String(1 + i * 7), { id: `c${i}`, podref: `ns/p${i}`, ifname: "net1" }]))
    expect(assigned(r, sparse)).toBe("10.20.0.2")
    expect(right(assign(r, { ...sparse, "65000": own("old") }))).toMatchObject({ key: "65000", existing: true })
  })

  it("an entry below the range's first address is checked too (the walk starts at the range)", () => {
    const below = ipRange("10.20.0.0/16", { start: "10.20.1.0" })
    expect(right(assign(below, { "5": own("old"), ...taken(256, 3000) }))).toMatchObject({ key: "5", existing: true })
    expect(assigned(below, { "5": { id: "x", podref: "ns/x", ifname: "net1" }, ...taken(256, 3000) })).toBe("10.20.12.184")
  })

  it("a hole that is excluded or reserved elsewhere is not the answer", () => {
    const gap = { ...taken(1, 100), ...taken(102, 99), ...taken(202, 100) }
    expect(assigned(ipRange("10.20.0.0/16", { exclude: ["10.20.0.101/32"] }), gap, [ip("10.20.0.201")])).toBe("10.20.1.46")
  })

  it("with two entries of the pod, the one under the lowest key wins (Object.values order)", () => {
    const pool = { ...taken(1, 2000), "1500": own("a"), "1200": own("b") }
    expect(right(assign(r, pool))).toMatchObject({ key: "1200", existing: true })
  })
})

describe("assignIP: idempotent ADD", () => {
  const before: Allocations = { ...taken(1, 2), "7": { id: "old", podref: "ns/new", ifname: "net1" } }

  it("same podref and ifname: same IP, id updated", () => {
    const result = right(assign(ipRange("10.0.0.0/24"), before))
    expect(result).toMatchObject({ key: "7", existing: true })
    expect(formatIP(result.ip)).toBe("10.0.0.7")
    expect(withAssignment(before, result)).toStrictEqual({ ...before, "7": { id: "new-container", podref: "ns/new", ifname: "net1" } })
    expect(before["7"]!.id).toBe("old")
  })

  it("a different ifname gets a new address", () => {
    const r = ipRange("10.0.0.0/24")
    const result = right(assignIP(r, r.cidr, before, { ...request, ifname: "net2" }))
    expect(result).toMatchObject({ key: "3", existing: false })
  })

  it("an entry without ifname matches the empty ifname", () => {
    const r = ipRange("10.0.0.0/24")
    const result = right(assignIP(r, r.cidr, { "9": { id: "old", podref: "ns/new" } }, { ...request, ifname: "" }))
    expect(result).toMatchObject({ key: "9", existing: true })
  })

  it("same id again: nothing to write, withAssignment returns the same map", () => {
    const r = ipRange("10.0.0.0/24")
    const same = { "7": { id: "new-container", podref: "ns/new", ifname: "net1" } }
    const result = right(assignIP(r, r.cidr, same, request))
    expect(result).toMatchObject({ key: "7", existing: true })
    expect(withAssignment(same, result)).toBe(same)
  })
})

describe("releaseById (CNI DEL)", () => {
  const allocations: Allocations = {
    "1": { id: "a", podref: "ns/a", ifname: "net1" },
    "2": { id: "a", podref: "ns/a", ifname: "net2" },
    "3": { id: "b", podref: "ns/b" }
  }

  it.each([
    ["a", "net1", "1"],
    ["a", "net2", "2"],
    ["b", "", "3"]
  ])("id %s ifname %j frees key %s only", (id, ifname, key) => {
    const result = releaseById(allocations, id, ifname)
    expect(result.freed).toBe(key)
    expect(Object.keys(result.allocations).sort()).toStrictEqual(["1", "2", "3"].filter((k) => k !== key))
  })

  it.each([
    ["a", "net3"],
    ["c", "net1"],
    ["b", "net1"]
  ])("no match (%s, %s) is not an error", (id, ifname) => {
    const result = releaseById(allocations, id, ifname)
    expect(result.freed).toBeUndefined()
    expect(result.allocations).toStrictEqual(allocations)
  })
})

describe("releaseByPodref", () => {
  const pool = cidr("10.0.0.0/24")
  const allocations: Allocations = {
    "1": { id: "a", podref: "ns/a", ifname: "net1" },
    "2": { id: "a", podref: "ns/a", ifname: "net2" },
    "3": { id: "b", podref: "ns/b", ifname: "net1" }
  }

  it("frees every entry of the pod", () => {
    const result = releaseByPodref(pool, allocations, "ns/a")
    expect([...result.freed].sort()).toStrictEqual(["1", "2"])
    expect(result.allocations).toStrictEqual({ "3": allocations["3"] })
  })

  it("frees only the given IPs", () => {
    const result = releaseByPodref(pool, allocations, "ns/a", [ip("10.0.0.2"), ip("10.0.0.3"), ip("fd00::1")])
    expect(result.freed).toStrictEqual(["2"])
    expect(result.allocations).toStrictEqual({ "1": allocations["1"], "3": allocations["3"] })
  })

  it("counts from spec.range as written", () => {
    const result = releaseByPodref(cidr("10.0.0.5/24"), { "1": { id: "a", podref: "ns/a" } }, "ns/a", [ip("10.0.0.6")])
    expect(result.freed).toStrictEqual(["1"])
  })

  it("an unknown pod frees nothing", () => {
    const result = releaseByPodref(pool, allocations, "ns/zzz")
    expect(result.freed).toStrictEqual([])
    expect(result.allocations).toStrictEqual(allocations)
  })
})
