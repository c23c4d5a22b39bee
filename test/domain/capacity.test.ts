/**
 * Capacity: the examples as tables, and brute force against the allocator we simulate
 * (assignIP, called for new pods until it refuses) on small IPv4 and IPv6 ranges.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import { assignIP } from "../../src/testing/allocate.ts"
import { allocatableIntervals, countWithin, intervalsSize, poolIntervals, sliceRange } from "../../src/domain/capacity.ts"
import { type Cidr, type Family, type IPAddress, bitsOf, formatCidr, formatIP, toNetworkForm, usableRange } from "../../src/domain/ip.ts"
import { type IpRange, decodeNadConfig } from "../../src/domain/ipam-config.ts"
import type { IPAllocation } from "../../src/domain/pool.ts"
import { cidr, ip, ipRange, right, show } from "./helpers.ts"

/** Distinct addresses the plugin can hand out from one range. */
const rangeCapacity = (range: IpRange): bigint => intervalsSize(allocatableIntervals(range))

/** Distinct addresses of one IPPool that any of its ranges may hand out (the union, each address once). */
const poolCapacity = (ranges: ReadonlyArray<IpRange>): bigint => intervalsSize(poolIntervals(ranges))

/** Addresses the plugin can hand out from a node slice of `range`'s network. */
const sliceCapacity = (range: IpRange, slice: Cidr): bigint => {
  const r = sliceRange(range, slice)
  return r === undefined ? 0n : rangeCapacity(r)
}

/** Intervals as readable text. */
const view = (intervals: ReturnType<typeof allocatableIntervals>) =>
  intervals.map((i) => `${formatIP({ family: i.family, value: i.first })}-${formatIP({ family: i.family, value: i.last })}`)

describe("rangeCapacity", () => {
  it.each([
    ["a /24: network and broadcast excluded", ipRange("10.0.0.0/24"), 254n],
    ["a /28 limited to ten by range_start/range_end", ipRange("10.0.0.0/28", { start: "10.0.0.3", end: "10.0.0.12" }), 10n],
    ["range_start = range_end: one address", ipRange("10.0.0.0/24", { start: "10.0.0.7", end: "10.0.0.7" }), 1n],
    ["range_start alone", ipRange("10.0.0.0/24", { start: "10.0.0.200" }), 55n],
    ["range_end alone", ipRange("10.0.0.0/24", { end: "10.0.0.10" }), 10n],
    ["range_start = network address is ignored", ipRange("10.0.0.0/24", { start: "10.0.0.0" }), 254n],
    ["range_end = broadcast is ignored", ipRange("10.0.0.0/24", { end: "10.0.0.255" }), 254n],
    ["bounds outside the CIDR are ignored", ipRange("10.0.0.0/24", { start: "10.0.1.5", end: "9.0.0.1" }), 254n],
    ["bounds of the other family are ignored", ipRange("10.0.0.0/24", { start: "fd00::5", end: "fd00::9" }), 254n],
    ["end below start: the end is ignored, the start kept", ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.5" }), 245n],
    ["overlapping and nested excludes count once", ipRange("10.0.0.0/24", { exclude: ["10.0.0.0/28", "10.0.0.8/29", "10.0.0.10", "10.0.0.4/30"] }), 239n],
    ["adjacent excludes", ipRange("10.0.0.0/24", { exclude: ["10.0.0.16/28", "10.0.0.0/28"] }), 223n],
    ["an exclude partly outside the window is clipped", ipRange("10.0.0.0/26", { exclude: ["10.0.0.32/27"] }), 31n],
    ["excludes are clipped to the bounds", ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.19", exclude: ["10.0.0.0/29", "10.0.0.16/28"] }), 6n],
    ["excluding the broadcast address costs nothing", ipRange("10.0.0.0/24", { exclude: ["10.0.0.255"] }), 254n],
    ["an exclude covering everything", ipRange("10.0.0.0/24", { exclude: ["10.0.0.0/16"] }), 0n],
    ["an exclude of the other family is ignored", ipRange("10.0.0.0/24", { exclude: ["::/0"] }), 254n],
    ["an exclude outside the CIDR is ignored", ipRange("10.0.0.0/24", { exclude: ["10.0.1.0/24"] }), 254n],
    ["a /30 has two", ipRange("10.0.0.0/30"), 2n],
    ["a /31 has none", ipRange("10.0.0.0/31"), 0n],
    ["a /32 has none", ipRange("10.0.0.1/32"), 0n],
    ["IPv6 /120 with an exclude", ipRange("fd00::/120", { exclude: ["fd00::/124", "fd00::10"] }), 238n],
    ["IPv6 /120: the last address is not usable either", ipRange("fd00::/120", { exclude: ["fd00::ff"] }), 254n],
    ["IPv6 /127 has none", ipRange("fd00::/127"), 0n],
    ["IPv6 /128 has none", ipRange("fd00::1/128"), 0n],
    ["IPv6 /64: 2^64 - 2", ipRange("2001:db8::/64"), 2n ** 64n - 2n],
    ["IPv6 /64 minus a /96", ipRange("2001:db8::/64", { exclude: ["2001:db8::/96"] }), 2n ** 64n - 2n ** 32n - 1n],
    ["IPv6 /48 with bounds", ipRange("2001:db8::/48", { start: "2001:db8:0:1::", end: "2001:db8:0:1::ffff" }), 65536n]
  ])("%s", (_, range, expected) => {
    expect(rangeCapacity(range)).toBe(expected)
  })

  // The CIDR's written address is the end (upstream config.go), so the bounds rule applies to it too.
  it.each([
    ["192.168.1.5-192.168.1.25/24", 21n],
    ["192.168.1.20-192.168.1.5/24: an end below the start is ignored", 235n],
    ["192.168.1.5-192.168.1.0/24: an end on the network address is ignored", 250n]
  ])("reads the <start>-<cidr> form as decoded from a NAD: %s", (text, expected) => {
    const range = text.split(":")[0]!
    const decoded = right(decodeNadConfig(JSON.stringify({ type: "macvlan", ipam: { type: "whereabouts", range } })))
    if (decoded._tag !== "Whereabouts") throw new Error("expected a whereabouts config")
    expect(rangeCapacity(decoded.config.ranges[0]!)).toBe(expected)
  })

  it("the intervals are sorted and disjoint, excludes cut out", () => {
    expect(view(allocatableIntervals(ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.40", exclude: ["10.0.0.32/30", "10.0.0.12", "10.0.0.13"] }))))
      .toStrictEqual(["10.0.0.10-10.0.0.11", "10.0.0.14-10.0.0.31", "10.0.0.36-10.0.0.40"])
  })
})

describe("poolCapacity: one IPPool written by several NADs", () => {
  it.each([
    ["no ranges", [], 0n],
    ["one NAD", [ipRange("10.0.0.0/24", { end: "10.0.0.10" })], 10n],
    ["two NADs with overlapping bounds: the union", [ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.19" }), ipRange("10.0.0.0/24", { start: "10.0.0.15", end: "10.0.0.29" })], 20n],
    ["two NADs with disjoint bounds", [ipRange("10.0.0.0/24", { end: "10.0.0.10" }), ipRange("10.0.0.0/24", { start: "10.0.0.101", end: "10.0.0.110" })], 20n],
    ["adjacent bounds", [ipRange("10.0.0.0/24", { end: "10.0.0.10" }), ipRange("10.0.0.0/24", { start: "10.0.0.11", end: "10.0.0.20" })], 20n],
    ["what one NAD excludes the other may hand out", [ipRange("10.0.0.0/24", { exclude: ["10.0.0.0/25"] }), ipRange("10.0.0.0/24", { end: "10.0.0.20" })], 147n],
    ["the same NAD twice counts once", [ipRange("fd00::/120"), ipRange("fd00::/120")], 254n],
    ["two /64 NADs", [ipRange("2001:db8::/64", { exclude: ["2001:db8::/65"] }), ipRange("2001:db8::/64", { end: "2001:db8::ffff" })], 2n ** 63n - 1n + 65535n]
  ])("%s", (_, ranges, expected) => {
    expect(poolCapacity(ranges)).toBe(expected)
  })

  it("merges overlapping and adjacent intervals", () => {
    const ranges = [ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.19" }), ipRange("10.0.0.0/24", { start: "10.0.0.20", end: "10.0.0.29" }), ipRange("10.0.0.0/24", { start: "10.0.0.50", end: "10.0.0.50" })]
    expect(view(poolIntervals(ranges))).toStrictEqual(["10.0.0.10-10.0.0.29", "10.0.0.50-10.0.0.50"])
  })

  it("keeps the families apart (IPv4 5 is not IPv6 ::5)", () => {
    expect(poolCapacity([ipRange("0.0.0.0/29"), ipRange("::/125")])).toBe(12n)
  })
})

describe("sliceCapacity: node slices (upstream drops the NAD's bounds and excludes inside a slice)", () => {
  const nad = ipRange("10.0.0.0/16", { start: "10.0.1.100", end: "10.0.1.110", exclude: ["10.0.1.0/28"] })

  it.each([
    ["a /24 slice: its own network and broadcast excluded, the NAD's bounds and excludes not applied", cidr("10.0.1.0/24"), 254n],
    ["a /28 slice", cidr("10.0.1.16/28"), 14n],
    ["a /30 slice", cidr("10.0.1.4/30"), 2n],
    ["a /31 slice: the plugin's ADD fails", cidr("10.0.1.4/31"), 0n],
    ["a slice written with host bits", cidr("10.0.1.77/24"), 254n],
    ["the whole network as one slice", cidr("10.0.0.0/16"), 65534n]
  ])("%s", (_, slice, expected) => {
    expect(sliceCapacity(nad, slice)).toBe(expected)
  })

  it("the slice range is the NAD's CIDR bounded by the slice's usable addresses", () => {
    const r = sliceRange(nad, cidr("10.0.1.0/24"))!
    expect({ range: r.range, start: formatIP(r.rangeStart!), end: formatIP(r.rangeEnd!), exclude: r.exclude }).toStrictEqual({
      range: "10.0.0.0/16",
      start: "10.0.1.1",
      end: "10.0.1.254",
      exclude: []
    })
    expect(sliceRange(nad, cidr("10.0.1.4/31"))).toBeUndefined()
  })

  it("a slice outside the NAD's CIDR: the bounds are ignored, as upstream ignores out-of-range bounds", () => {
    expect(sliceCapacity(ipRange("10.0.0.0/24"), cidr("10.0.9.0/28"))).toBe(254n)
  })
})

describe("countWithin", () => {
  it("counts the addresses inside the intervals, of the right family", () => {
    const set = allocatableIntervals(ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.40", exclude: ["10.0.0.32/30"] }))
    const ips = ["10.0.0.9", "10.0.0.10", "10.0.0.31", "10.0.0.32", "10.0.0.36", "10.0.0.40", "10.0.0.41"].map(ip)
    expect(countWithin(set, ips)).toBe(4)
    expect(countWithin(set, [{ family: 6, value: ip("10.0.0.20").value }])).toBe(0)
    expect(countWithin([], ips)).toBe(0)
  })
})

/** Brute force: the addresses assignIP hands out to one new pod after another, until it refuses. */
const handedOut = (range: IpRange, pool: Cidr = range.cidr): Set<bigint> => {
  // Mutated in place: assignIP reads the pool without copying it, and a copy per ADD would make this quadratic.
  const allocations: Record<string, IPAllocation> = {}
  const seen = new Set<bigint>()
  const usable = usableRange(range.cidr)
  const limit = usable === undefined ? 0n : usable.last - usable.first + 1n
  for (let n = 0; ; n++) {
    const result = assignIP(range, pool, allocations, { id: `c${n}`, podref: `ns/p${n}`, ifname: "net1" })
    if (Either.isLeft(result)) return seen
    const { ip: got, key, entry, existing } = result.right
    if (existing || seen.has(got.value)) throw new Error(`handed out ${formatIP(got)} twice for ${show(range)}`)
    if (BigInt(n) >= limit) throw new Error(`more addresses than the CIDR has usable for ${show(range)}`)
    seen.add(got.value)
    allocations[key] = entry
  }
}

const expand = (intervals: ReturnType<typeof allocatableIntervals>): Set<bigint> => {
  const out = new Set<bigint>()
  for (const i of intervals) for (let v = i.first; v <= i.last; v++) out.add(v)
  return out
}

const top = (family: Family): bigint => (1n << BigInt(bitsOf(family))) - 1n
const otherFamily = (family: Family): Family => (family === 4 ? 6 : 4)

/** A small network: IPv4 /24–/30 or IPv6 /120–/126, anywhere in the family's space. */
const smallNetwork: fc.Arbitrary<Cidr> = fc
  .oneof(
    fc.tuple(fc.constant<Family>(4), fc.bigInt({ min: 0n, max: top(4) }), fc.integer({ min: 24, max: 30 })),
    // Low IPv6 networks too, where an IPv4 value of the same number exists (a family mix-up would show).
    fc.tuple(fc.constant<Family>(6), fc.oneof(fc.bigInt({ min: 0n, max: top(6) }), fc.bigInt({ min: 0n, max: top(4) })), fc.integer({ min: 120, max: 126 }))
  )
  .map(([family, address, prefix]) => toNetworkForm({ family, address, prefix }))

/**
 * A config's range over `net`: bounds and excludes mostly near it (inside, on its network and
 * broadcast addresses, just outside), sometimes of the other family; excludes are CIDRs from one
 * bit wider than the network down to bare IPs.
 */
const rangeOver = (net: Cidr): fc.Arbitrary<IpRange> => {
  const { family, prefix } = net
  const bits = bitsOf(family)
  const size = 1 << (bits - prefix)
  const near = fc.integer({ min: -3, max: size + 2 }).map((o) => net.address + BigInt(o)).filter((v) => v >= 0n && v <= top(family))
  // The other family's addresses: anywhere, or the same numbers as near ones (what a family mix-up would confuse).
  const anywhere = fc.bigInt({ min: 0n, max: top(otherFamily(family)) })
  const foreign = net.address + BigInt(size) + 2n <= top(otherFamily(family)) ? fc.oneof(anywhere, near) : anywhere
  const address = fc.oneof(
    { weight: 8, arbitrary: near.map((value): IPAddress => ({ family, value })) },
    { weight: 1, arbitrary: foreign.map((value): IPAddress => ({ family: otherFamily(family), value })) }
  )
  const bound = fc.option(address, { nil: undefined, freq: 3 })
  const exclude = fc.oneof(
    { weight: 2, arbitrary: near.map((address): Cidr => ({ family, address, prefix: bits })) },
    { weight: 3, arbitrary: fc.tuple(near, fc.integer({ min: prefix - 1, max: bits })).map(([address, p]) => toNetworkForm({ family, address, prefix: p })) },
    { weight: 1, arbitrary: fc.tuple(foreign, fc.integer({ min: 0, max: 8 })).map(([address, wider]) => toNetworkForm({ family: otherFamily(family), address, prefix: bitsOf(otherFamily(family)) - wider })) }
  )
  return fc.record({ rangeStart: bound, rangeEnd: bound, exclude: fc.array(exclude, { maxLength: 4 }) }).map(({ rangeStart, rangeEnd, exclude }) => ({
    range: formatCidr(net),
    cidr: net,
    ...(rangeStart === undefined ? {} : { rangeStart }),
    ...(rangeEnd === undefined ? {} : { rangeEnd }),
    exclude
  }))
}

describe("capacity against the allocator (brute force)", () => {
  it.prop("rangeCapacity is the number of distinct addresses assignIP hands out before it refuses, and the intervals are those addresses", [smallNetwork.chain(rangeOver)], ([range]) => {
    const got = handedOut(range)
    expect(rangeCapacity(range), show(range)).toBe(BigInt(got.size))
    expect(expand(allocatableIntervals(range)), show(range)).toStrictEqual(got)
  }, { fastCheck: { numRuns: 1000 } })

  it.prop("poolCapacity is the union of what each NAD's allocator hands out", [smallNetwork.chain((net) => fc.array(rangeOver(net), { minLength: 1, maxLength: 3 }))], ([ranges]) => {
    const union = new Set(ranges.flatMap((r) => [...handedOut(r)]))
    expect(poolCapacity(ranges), show(ranges)).toBe(BigInt(union.size))
    expect(expand(poolIntervals(ranges)), show(ranges)).toStrictEqual(union)
  }, { fastCheck: { numRuns: 300 } })

  it.prop("sliceCapacity is what assignIP hands out from the slice, whatever the NAD's bounds and excludes", [
    smallNetwork.chain((net) =>
      fc.record({
        range: rangeOver(net),
        slice: fc.tuple(fc.integer({ min: net.prefix, max: bitsOf(net.family) }), fc.integer({ min: 0, max: 255 })).map(([p, i]): Cidr =>
          toNetworkForm({ family: net.family, address: net.address + BigInt(i % (1 << (p - net.prefix))) * (1n << BigInt(bitsOf(net.family) - p)), prefix: p }))
      })
    )
  ], ([{ range, slice }]) => {
    const r = sliceRange(range, slice)
    const usable = usableRange(slice)
    expect(sliceCapacity(range, slice), show({ range, slice })).toBe(usable === undefined ? 0n : usable.last - usable.first + 1n)
    expect(r === undefined ? 0 : handedOut(r, slice).size, show({ range, slice })).toBe(Number(sliceCapacity(range, slice)))
  }, { fastCheck: { numRuns: 300 } })
})
