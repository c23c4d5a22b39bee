import { describe, expect, it } from "@effect/vitest"
import {
  allocatableIntervals,
  capacityToNumber,
  countWithin,
  poolCapacity,
  poolIntervals,
  rangeCapacity,
  sliceCapacity,
  sliceRange
} from "../../src/domain/capacity.ts"
import { formatIP } from "../../src/domain/ip.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { cidr, ip, ipRange, right } from "./helpers.ts"

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

  it("reads the <start>-<cidr> form as decoded from a NAD", () => {
    const decoded = right(decodeNadConfig(JSON.stringify({ type: "macvlan", ipam: { type: "whereabouts", range: "192.168.1.5-192.168.1.25/24" } })))
    if (decoded._tag !== "Whereabouts") throw new Error("expected a whereabouts config")
    expect(rangeCapacity(decoded.config.ranges[0]!)).toBe(21n)
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

describe("countWithin and capacityToNumber", () => {
  it("counts the addresses inside the intervals, of the right family", () => {
    const set = allocatableIntervals(ipRange("10.0.0.0/24", { start: "10.0.0.10", end: "10.0.0.40", exclude: ["10.0.0.32/30"] }))
    const ips = ["10.0.0.9", "10.0.0.10", "10.0.0.31", "10.0.0.32", "10.0.0.36", "10.0.0.40", "10.0.0.41"].map(ip)
    expect(countWithin(set, ips)).toBe(4)
    expect(countWithin(set, [{ family: 6, value: ip("10.0.0.20").value }])).toBe(0)
    expect(countWithin([], ips)).toBe(0)
  })

  it("exact up to 2^53, nearest double beyond", () => {
    expect(capacityToNumber(2n ** 53n - 1n)).toBe(Number.MAX_SAFE_INTEGER)
    expect(capacityToNumber(rangeCapacity(ipRange("2001:db8::/64")))).toBe(18446744073709552000)
  })
})
