import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { type Cidr, type IPAddress, cidrAddress, formatIP, toNetworkForm } from "../../src/domain/ip.ts"
import { offsetOf } from "../../src/testing/allocate.ts"
import {
  type IPAllocation,
  normalizeRange,
  parsePool,
  parseReservationName,
  poolName,
  poolNetworkName,
  reservationName
} from "../../src/domain/pool.ts"
import { anyIP, cidr, ip, ipv4Value, ipv6Value } from "./helpers.ts"

/** The reverse of parsePool: an allocation map keyed by decimal offset; IPs below the range's address are rejected. */
const toAllocations = <R extends { readonly ip: IPAddress; readonly id: string; readonly podref: string; readonly ifname?: string | undefined }>(
  cidr: Cidr,
  reservations: ReadonlyArray<R>
): { readonly allocations: Record<string, IPAllocation>; readonly rejected: ReadonlyArray<R> } => {
  const base = cidrAddress(cidr)
  const allocations: Record<string, IPAllocation> = {}
  const rejected: Array<R> = []
  for (const r of reservations) {
    const offset = offsetOf(base, r.ip)
    if (offset === undefined) rejected.push(r)
    else allocations[offset.toString()] = r.ifname === undefined ? { id: r.id, podref: r.podref } : { id: r.id, podref: r.podref, ifname: r.ifname }
  }
  return { allocations, rejected }
}

const pool = (range: string, allocations: Record<string, unknown>, name = normalizeRange(range)) =>
  parsePool({ metadata: { name }, spec: { range, allocations } })

const alloc = (podref: string, ifname?: string) => ({ id: `c-${podref}`, podref, ...(ifname === undefined ? {} : { ifname }) })

describe("pool and reservation names", () => {
  it.each([
    ["10.0.0.0/8", "", "10.0.0.0-8"],
    ["10.0.0.0/8", "test", "test-10.0.0.0-8"],
    ["2001:db8::/64", "", "2001-db8---64"],
    ["fd00::/120", "my-net", "my-net-fd00---120"]
  ])("poolName(%s, %j) = %s", (range, network, expected) => {
    expect(poolName(range, network)).toBe(expected)
  })

  it.each([
    ["2001:db8::", "2001-db8--0"], // only a trailing ":" gets the extra "0"
    ["2001:db8::/64", "2001-db8---64"],
    ["10.0.0.0/8", "10.0.0.0-8"]
  ])("normalizeRange(%s) = %s", (range, expected) => {
    expect(normalizeRange(range)).toBe(expected)
  })

  it.each([
    ["10.0.0.5", "", "10.0.0.5"],
    ["10.0.0.5", "net1", "net1-10.0.0.5"],
    ["2001:db8::5", "", "2001-db8--5"],
    ["2001:db8::", "", "2001-db8--0"],
    ["2001:db8::", "a-b", "a-b-2001-db8--0"],
    ["::", "", "--0"],
    ["::1", "", "--1"],
    ["FD00:0:0:1:0:0:0:1", "", "fd00-0-0-1--1"],
    ["fd00::7", "my-net", "my-net-fd00--7"]
  ])("reservationName(%s, %j) = %s", (text, network, expected) => {
    expect(reservationName(ip(text), network)).toBe(expected)
  })

  it.each([
    ["10.0.0.5", [["", "10.0.0.5"]]],
    ["my-net-10.0.0.5", [["my-net", "10.0.0.5"]]],
    ["2001-db8--0", [["", "2001:db8::"]]],
    ["garbage", []],
    ["net1-garbage", []],
    ["-10.0.0.5", []]
  ] as const)("parseReservationName(%s)", (name, expected) => {
    const got = parseReservationName(name).map((c) => [c.networkName, formatIP(c.ip)])
    for (const e of expected) expect(got).toContainEqual(e)
    if (expected.length === 0) expect(got).toStrictEqual([])
    else expect(got[0]).toStrictEqual(expected[0])
  })

  const networkName = fc.oneof(
    fc.constantFrom("", "net1", "my-net", "a-b-c", "dead-beef", "x", "fd00"),
    fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/)
  )

  it.prop("parseReservationName's candidates include what reservationName encoded", [anyIP, networkName], ([x, network]) => {
    const candidates = parseReservationName(reservationName(x, network))
    expect(candidates).toContainEqual({ networkName: network, ip: x })
    if (network === "") expect(candidates[0]).toStrictEqual({ networkName: "", ip: x })
  }, { fastCheck: { numRuns: 500 } })

  it.each([
    ["test-10.0.0.0-8", "10.0.0.0/8", "test"],
    ["10.0.0.0-8", "10.0.0.0/8", ""],
    ["my-net-2001-db8---64", "2001:db8::/64", "my-net"],
    ["other", "10.0.0.0/8", undefined],
    ["x10.0.0.0-8", "10.0.0.0/8", undefined]
  ])("poolNetworkName(%s, %s) = %j", (name, range, expected) => {
    expect(poolNetworkName(name, range)).toBe(expected)
  })
})

describe("parsePool", () => {
  it("offsets count from the address as written in spec.range", () => {
    const parsed = pool("10.0.0.5/24", { "1": { id: "c1", podref: "ns/a", ifname: "net1" }, "0": { id: "", podref: "ns/b" } })
    expect(parsed.invalid).toStrictEqual([])
    const byKey = Object.fromEntries(parsed.entries.map((e) => [e.key, e]))
    expect(byKey["1"]).toStrictEqual({ key: "1", ip: ip("10.0.0.6"), id: "c1", podref: "ns/a", ifname: "net1" })
    expect(byKey["0"]).toStrictEqual({ key: "0", ip: ip("10.0.0.5"), id: "", podref: "ns/b", ifname: undefined })
    expect(parsed.cidr).toStrictEqual(cidr("10.0.0.5/24"))
  })

  it.each(["-1", "abc", "1.5", "01", "", "+1", " 1", "1e3", "0x10"])("offset %j is reported, never fatal", (key) => {
    const parsed = pool("10.0.0.0/24", { [key]: alloc("ns/bad"), "7": alloc("ns/good") })
    expect(parsed.invalid.map((i) => i.key)).toStrictEqual([key])
    expect(parsed.entries.map((e) => [e.key, formatIP(e.ip), e.podref])).toStrictEqual([["7", "10.0.0.7", "ns/good"]])
  })

  it.each([
    [{ id: "c" }],
    [{ id: "c", podref: "" }],
    [{ id: "c", podref: 5 }],
    [{ podref: "ns/a" }],
    [{ id: "c", podref: "ns/a", ifname: 1 }],
    [null],
    ["ns/a"]
  ])("an entry without a usable id or podref is reported: %j", (entry) => {
    const parsed = pool("10.0.0.0/24", { "3": entry, "4": alloc("ns/good") })
    expect(parsed.invalid.map((i) => i.key)).toStrictEqual(["3"])
    expect(parsed.entries.map((e) => e.key)).toStrictEqual(["4"])
  })

  it.each([
    ["18446744073709551615", "2001:db8::ffff:ffff:ffff:ffff"], // the largest offset upstream can write
    ["18446744073709551616", "2001:db8:0:1::"],
    ["604462909807314587353088", "2001:db8:0:8000::"], // 2^79
    ["1208925819614629174706175", "2001:db8:0:ffff:ffff:ffff:ffff:ffff"] // 2^80 - 1, last of the /48
  ])("IPv6 /48 offset %s → %s", (key, expected) => {
    const parsed = pool("2001:db8::/48", { [key]: alloc("ns/a") })
    expect(parsed.invalid).toStrictEqual([])
    expect(parsed.entries.map((e) => [e.key, formatIP(e.ip)])).toStrictEqual([[key, expected]])
  })

  it("offsets that leave the address family are reported", () => {
    expect(pool("255.255.255.0/24", { "256": alloc("ns/a") }).invalid.map((i) => i.key)).toStrictEqual(["256"])
    expect(pool("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120", { "256": alloc("ns/a") }).invalid.map((i) => i.key)).toStrictEqual(["256"])
  })

  it("a pool whose range is not a CIDR reports every entry and reads none", () => {
    const parsed = pool("bogus", { "1": alloc("ns/a"), "2": alloc("ns/b") }, "bogus")
    expect(parsed.cidr).toBeUndefined()
    expect(parsed.entries).toStrictEqual([])
    expect(parsed.invalid.map((i) => i.key).sort()).toStrictEqual(["1", "2"])
  })
})

describe("toAllocations", () => {
  it("rejects IPs below the range's address and of the other family", () => {
    const below = { ip: ip("10.0.0.4"), id: "c", podref: "ns/a" }
    const v6 = { ip: ip("::10.0.0.9"), id: "c", podref: "ns/b" }
    const ok = { ip: ip("10.0.0.9"), id: "c", podref: "ns/c", ifname: "net1" }
    const result = toAllocations(cidr("10.0.0.5/24"), [below, v6, ok])
    expect(result.rejected).toStrictEqual([below, v6])
    expect(result.allocations).toStrictEqual({ "4": { id: "c", podref: "ns/c", ifname: "net1" } })
  })

  const family = fc.oneof(
    fc.tuple(fc.constant(4 as const), ipv4Value, fc.integer({ min: 16, max: 32 })),
    fc.tuple(fc.constant(6 as const), ipv6Value, fc.integer({ min: 40, max: 128 }))
  )
  const entry = fc.record({
    id: fc.string({ maxLength: 8 }),
    podref: fc.tuple(fc.stringMatching(/^[a-z]{1,6}$/), fc.stringMatching(/^[a-z0-9-]{1,10}$/)).map(([ns, n]) => `${ns}/${n}`),
    ifname: fc.option(fc.constantFrom("net1", "net2", "eth1"), { nil: undefined })
  })

  it.prop(
    "is the inverse of parsePool",
    [family, fc.array(fc.tuple(fc.bigInt({ min: 0n, max: (1n << 90n) - 1n }), entry), { maxLength: 20 })],
    ([[fam, value, prefix], raw]) => {
      const c = { family: fam, address: value, prefix }
      const size = (1n << BigInt((fam === 4 ? 32 : 128) - prefix)) - (value - toNetworkForm(c).address)
      const allocations: Record<string, { id: string; podref: string; ifname?: string }> = {}
      for (const [offset, e] of raw) {
        const { ifname, ...rest } = e
        allocations[(offset % size).toString()] = ifname === undefined ? rest : { ...rest, ifname }
      }
      const parsed = parsePool({ metadata: { name: "p" }, spec: { range: `${formatIP({ family: fam, value })}/${prefix}`, allocations } })
      expect(parsed.invalid).toStrictEqual([])
      const back = toAllocations(parsed.cidr!, parsed.entries)
      expect(back.rejected).toStrictEqual([])
      expect(back.allocations).toStrictEqual(allocations)
    }
  )

  it.prop("keeps every IP at or above the base", [anyIP, anyIP], ([base, x]) => {
    const c = { family: base.family, address: base.value, prefix: base.family === 4 ? 32 : 128 }
    const { allocations, rejected } = toAllocations(c, [{ ip: x, id: "c", podref: "ns/a" }])
    const accepted = x.family === base.family && x.value >= base.value
    expect(rejected.length).toBe(accepted ? 0 : 1)
    if (accepted) expect(Object.keys(allocations)).toStrictEqual([(x.value - base.value).toString()])
  })
})

describe("parsePool with the previous version", () => {
  const v1 = { "1": alloc("ns/a", "net1"), "2": alloc("ns/b", "net1"), "3": alloc("ns/c"), x: alloc("ns/bad") }

  it("keeps the previous version's objects for unchanged entries; changed, added and removed ones follow the new version", () => {
    const before = pool("10.0.0.0/24", v1)
    const v2 = { "1": alloc("ns/a", "net1"), "2": { ...alloc("ns/b", "net1"), id: "c-new" }, "4": alloc("ns/d"), x: alloc("ns/bad") }
    const after = parsePool({ metadata: { name: "p" }, spec: { range: "10.0.0.0/24", allocations: v2 } }, before)
    expect(after).toStrictEqual(pool("10.0.0.0/24", v2, "p"))
    const byKey = (p: typeof after) => new Map(p.entries.map((e) => [e.key, e] as const))
    expect(byKey(after).get("1")).toBe(byKey(before).get("1"))
    expect(byKey(after).get("2")).not.toBe(byKey(before).get("2"))
    expect(byKey(after).get("2")!.id).toBe("c-new")
    expect(byKey(after).has("3")).toBe(false)
  })

  it("an interface name that appears or goes is a change; a new range reuses nothing", () => {
    const before = pool("10.0.0.0/24", v1)
    const ifnameGone = parsePool({ metadata: { name: "p" }, spec: { range: "10.0.0.0/24", allocations: { ...v1, "1": alloc("ns/a") } } }, before)
    expect(ifnameGone.entries.find((e) => e.key === "1")!.ifname).toBeUndefined()
    const moved = parsePool({ metadata: { name: "p" }, spec: { range: "10.0.1.0/24", allocations: v1 } }, before)
    expect(moved.entries.find((e) => e.key === "1")!.ip).toEqual(ip("10.0.1.1"))
    expect(moved.entries.some((e) => before.entries.includes(e))).toBe(false)
  })

  it("always equals parsing the new version alone", () => {
    const entry = fc.record({ id: fc.constantFrom("c1", "c2"), podref: fc.constantFrom("ns/a", "ns/b"), ifname: fc.option(fc.constantFrom("net1", "net2"), { nil: undefined }) }).map((a) =>
      a.ifname === undefined ? { id: a.id, podref: a.podref } : a
    )
    const allocations = fc.dictionary(fc.oneof(fc.integer({ min: 0, max: 20 }).map(String), fc.constantFrom("01", "x", "-1")), fc.oneof(entry, fc.constant({ podref: "" })), { maxKeys: 12 })
    const range = fc.constantFrom("10.0.0.0/24", "10.0.0.0/28", "fd00::/120")
    fc.assert(
      fc.property(range, allocations, range, allocations, (r1, a1, r2, a2) => {
        const before = parsePool({ metadata: { name: "p" }, spec: { range: r1, allocations: a1 } })
        expect(parsePool({ metadata: { name: "p" }, spec: { range: r2, allocations: a2 } }, before)).toStrictEqual(
          parsePool({ metadata: { name: "p" }, spec: { range: r2, allocations: a2 } })
        )
      })
    )
  })
})
