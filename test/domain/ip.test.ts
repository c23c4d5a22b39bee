import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import {
  addOffset,
  cidrContains,
  formatCidr,
  formatIP,
  ipEquals,
  ipKey,
  lastOf,
  networkOf,
  parseCidr,
  parseIP,
  parseIPStrict,
  toNetworkForm,
  usableRange
} from "../../src/domain/ip.ts"
import { offsetOf } from "../../src/testing/allocate.ts"
import { anyIP, cidr, ip, ipv4Value, ipv6Value } from "./helpers.ts"

/** The WHATWG URL host serializer writes IPv6 as RFC 5952 text, like Go's net.IP.String(). */
const whatwg = (text: string): string => new URL(`http://[${text}]`).hostname.slice(1, -1)

const groupsOf = (v: bigint): string =>
  Array.from({ length: 8 }, (_, i) => ((v >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(":")

describe("parseIP", () => {
  it.each([
    ["10.1.2.3", 4, 0x0a010203n],
    ["010.001.002.003", 4, 0x0a010203n], // leading zeros are decimal, not octal (Go's ParseIPSloppy)
    ["0.0.0.0", 4, 0n],
    ["255.255.255.255", 4, 0xffffffffn],
    ["::", 6, 0n],
    ["::1", 6, 1n],
    ["::ffff:1.2.3.4", 6, 0xffff01020304n],
    ["2001:DB8::1", 6, 0x20010db8000000000000000000000001n],
    ["2001:db8:0:0:0:0:0:1", 6, 0x20010db8000000000000000000000001n],
    ["FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF", 6, (1n << 128n) - 1n]
  ] as const)("accepts %s", (text, family, value) => {
    expect(parseIP(text)).toStrictEqual({ family, value })
  })

  it.each([
    "256.1.1.1",
    "1.2.3.256",
    "1.2.3",
    "1.2.3.4.5",
    "1.2.3.",
    " 1.2.3.4",
    "1.2.3.4 ",
    "1.2. 3.4",
    "1.2.3.4%eth0",
    "fe80::1%eth0",
    "fe80::1%",
    "0x1.2.3.4",
    "-1.2.3.4",
    "1.2.3.4/24",
    "[::1]",
    "1::2::3",
    "12345::",
    "1:2:3:4:5:6:7:8:9",
    "::g",
    " ::1",
    "::1 ",
    "garbage",
    ""
  ])("rejects %j", (text) => {
    expect(parseIP(text)).toBeUndefined()
  })
})

describe("formatIP (Go's net.IP.String())", () => {
  it.each([
    ["10.1.2.3", "10.1.2.3"],
    ["0.0.0.0", "0.0.0.0"],
    ["255.255.255.255", "255.255.255.255"],
    ["0:0:0:0:0:0:0:0", "::"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["1:0:0:0:0:0:0:0", "1::"],
    ["2001:DB8:0:0:0:0:0:0", "2001:db8::"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // equal runs: the first one is compressed
    ["2001:0:0:1:0:0:0:1", "2001:0:0:1::1"], // the longest run wins
    ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"], // a single zero group stays
    ["1:2:3:4:5:6:7:0", "1:2:3:4:5:6:7:0"],
    ["0:1:2:3:4:5:6:7", "0:1:2:3:4:5:6:7"],
    ["2001:0DB8:00AB:0000:0000:0000:0000:0001", "2001:db8:ab::1"]
  ])("%s → %s", (text, expected) => {
    expect(formatIP(ip(text))).toBe(expected)
  })

  it.prop("IPv6 text equals the WHATWG serializer's (RFC 5952)", [ipv6Value], ([value]) => {
    expect(formatIP({ family: 6, value })).toBe(whatwg(groupsOf(value)))
  }, { fastCheck: { numRuns: 2000 } })

  it.prop("parseIP(formatIP(x)) === x for both families", [anyIP], ([x]) => {
    expect(parseIP(formatIP(x))).toStrictEqual(x)
  }, { fastCheck: { numRuns: 1000 } })
})

describe("parseCidr", () => {
  it.each([
    ["10.0.0.0/8", 4, 0x0a000000n, 8],
    ["192.168.2.230/24", 4, 0xc0a802e6n, 24], // host bits kept: offsets count from the written address
    ["010.000.000.000/8", 4, 0x0a000000n, 8],
    ["0.0.0.0/0", 4, 0n, 0],
    ["1.2.3.4/32", 4, 0x01020304n, 32],
    ["::/0", 6, 0n, 0],
    ["2001:db8::/128", 6, 0x20010db8n << 96n, 128]
  ] as const)("accepts %s", (text, family, address, prefix) => {
    expect(parseCidr(text)).toStrictEqual({ family, address, prefix })
  })

  it.each([
    "10.0.0.0",
    "10.0.0.0/",
    "10.0.0.0/33",
    "::/129",
    "10.0.0.0/-1",
    "10.0.0.0/+8",
    "10.0.0.0/0x8",
    "10.0.0.0/8a",
    "10.0.0.0/1e1",
    "10.0.0.0/ 8",
    "10.0.0.0/8 ",
    "10.0.0.0/8/8",
    "/8",
    "bogus/8",
    "256.0.0.0/8",
    "fe80::1%eth0/64"
  ])("rejects %j", (text) => {
    expect(parseCidr(text)).toBeUndefined()
  })
})

describe("network, last and usable addresses", () => {
  it.each([
    ["192.168.2.230/24", "192.168.2.0", "192.168.2.255", ["192.168.2.1", "192.168.2.254"], "192.168.2.0/24"],
    ["10.0.0.0/30", "10.0.0.0", "10.0.0.3", ["10.0.0.1", "10.0.0.2"], "10.0.0.0/30"],
    ["10.0.0.1/31", "10.0.0.0", "10.0.0.1", undefined, "10.0.0.0/31"],
    ["10.0.0.5/32", "10.0.0.5", "10.0.0.5", undefined, "10.0.0.5/32"],
    ["0.0.0.0/0", "0.0.0.0", "255.255.255.255", ["0.0.0.1", "255.255.255.254"], "0.0.0.0/0"],
    ["2001:db8::1/64", "2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", ["2001:db8::1", "2001:db8::ffff:ffff:ffff:fffe"], "2001:db8::/64"],
    ["2001:db8::/126", "2001:db8::", "2001:db8::3", ["2001:db8::1", "2001:db8::2"], "2001:db8::/126"],
    ["2001:db8::/127", "2001:db8::", "2001:db8::1", undefined, "2001:db8::/127"],
    ["2001:db8::7/128", "2001:db8::7", "2001:db8::7", undefined, "2001:db8::7/128"],
    ["::/0", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ["::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"], "::/0"]
  ] as const)("%s", (text, network, last, usable, formatted) => {
    const c = cidr(text)
    expect(networkOf(c)).toBe(ip(network).value)
    expect(lastOf(c)).toBe(ip(last).value)
    expect(usableRange(c)).toStrictEqual(usable === undefined ? undefined : { first: ip(usable[0]).value, last: ip(usable[1]).value })
    expect(formatCidr(c)).toBe(formatted)
    expect(toNetworkForm(c)).toStrictEqual({ ...c, address: ip(network).value })
  })

  it.each([
    ["10.0.0.0/24", "10.0.0.0", true],
    ["10.0.0.0/24", "10.0.0.255", true],
    ["10.0.0.0/24", "10.0.1.0", false],
    ["10.0.0.0/24", "9.255.255.255", false],
    ["10.0.0.7/24", "10.0.0.1", true], // membership is by network, not from the written address
    ["::/96", "0.0.0.1", false], // families never mix
    ["2001:db8::/64", "2001:db8::ffff:ffff:ffff:ffff", true],
    ["2001:db8::/64", "2001:db8:0:1::", false]
  ] as const)("cidrContains(%s, %s) = %s", (c, x, expected) => {
    expect(cidrContains(cidr(c), ip(x))).toBe(expected)
  })
})

describe("offsets", () => {
  it.each([
    ["10.0.0.5", 1n, "10.0.0.6"],
    ["10.0.0.0", 256n, "10.0.1.0"],
    ["255.255.255.254", 1n, "255.255.255.255"],
    ["2001:db8::", 1n << 64n, "2001:db8:0:1::"],
    ["2001:db8::", (1n << 80n) - 1n, "2001:db8:0:ffff:ffff:ffff:ffff:ffff"]
  ] as const)("%s + %s = %s", (base, offset, expected) => {
    expect(addOffset(ip(base), offset)).toStrictEqual(ip(expected))
    expect(offsetOf(ip(base), ip(expected))).toBe(offset)
  })

  it.each([
    ["255.255.255.255", 1n],
    ["0.0.0.0", 1n << 32n],
    ["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1n],
    ["10.0.0.5", -1n]
  ] as const)("%s + %s leaves the family → undefined", (base, offset) => {
    expect(addOffset(ip(base), offset)).toBeUndefined()
  })

  it("offsetOf is undefined below the base and across families", () => {
    expect(offsetOf(ip("10.0.0.5"), ip("10.0.0.4"))).toBeUndefined()
    expect(offsetOf(ip("::"), ip("10.0.0.4"))).toBeUndefined()
    expect(offsetOf(ip("10.0.0.5"), ip("10.0.0.5"))).toBe(0n)
  })

  it.prop("IPv4: addOffset and offsetOf round-trip; past the top is undefined", [ipv4Value, ipv4Value], ([base, offset]) => {
    const b = { family: 4 as const, value: base }
    const sum = addOffset(b, offset)
    if (base + offset > 0xffffffffn) {
      expect(sum).toBeUndefined()
    } else {
      expect(sum).toStrictEqual({ family: 4, value: base + offset })
      expect(offsetOf(b, sum!)).toBe(offset)
    }
  })

  it.prop(
    "IPv6 /48: every offset (also beyond 2^64) stays in the /48 and round-trips",
    [ipv6Value, fc.oneof(fc.bigInt({ min: 0n, max: (1n << 80n) - 1n }), fc.bigInt({ min: 1n << 64n, max: (1n << 80n) - 1n }))],
    ([value, offset]) => {
      const c = toNetworkForm({ family: 6, address: value, prefix: 48 })
      const base = { family: 6 as const, value: c.address }
      const sum = addOffset(base, offset)
      expect(sum).toBeDefined()
      expect(cidrContains(c, sum!)).toBe(true)
      expect(offsetOf(base, sum!)).toBe(offset)
    }
  )

  it.prop("IPv6: addOffset past 2^128 - 1 is undefined", [ipv6Value, ipv6Value], ([base, offset]) => {
    const sum = addOffset({ family: 6, value: base }, offset)
    expect(sum === undefined).toBe(base + offset > (1n << 128n) - 1n)
  })
})

describe("ipEquals / ipKey", () => {
  it("compare by family and value", () => {
    expect(ipEquals(ip("2001:db8::1"), ip("2001:DB8:0::1"))).toBe(true)
    expect(ipEquals(ip("0.0.0.1"), ip("::1"))).toBe(false)
    expect(ipKey(ip("0.0.0.1"))).not.toBe(ipKey(ip("::1")))
    expect(ipKey(ip("2001:db8::1"))).toBe(ipKey(ip("2001:db8:0:0:0:0:0:1")))
  })
})

describe("parseIPStrict (Go's net.ParseIP)", () => {
  it.each([
    ["10.0.0.10", "10.0.0.10"],
    ["0.0.0.0", "0.0.0.0"],
    ["fd00::10", "fd00::10"],
    ["2001:0db8::1", "2001:db8::1"]
  ])("accepts %s", (text, formatted) => {
    const parsed = parseIPStrict(text)
    expect(parsed === undefined ? undefined : formatIP(parsed)).toBe(formatted)
  })
  it.each(["10.0.0.010", "010.0.0.1", "10.00.0.1", "bogus"])("refuses %s (parseIP reads the leading zeros as decimal)", (text) => {
    expect(parseIPStrict(text)).toBeUndefined()
  })
})
