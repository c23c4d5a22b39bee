import { describe, expect, it } from "@effect/vitest"
import { formatCidr, formatIP } from "../../src/domain/ip.ts"
import {
  DEFAULT_RECONCILER_CRON,
  type IpamConfig,
  type IpRange,
  decodeNadConfig
} from "../../src/domain/ipam-config.ts"
import { left, right } from "./helpers.ts"

const CONTRACT_PATHS = [
  "/etc/kubernetes/cni/net.d/whereabouts.d/whereabouts.conf",
  "/etc/cni/net.d/whereabouts.d/whereabouts.conf",
  "/host/etc/cni/net.d/whereabouts.d/whereabouts.conf"
]

/** A single-plugin NAD config with a whereabouts `ipam`. */
const nad = (ipam: Record<string, unknown>): string =>
  JSON.stringify({ cniVersion: "0.3.1", name: "macvlan-net", type: "macvlan", master: "eth0", ipam: { type: "whereabouts", ...ipam } })

const decode = (text: string, flat?: (paths: ReadonlyArray<string>) => Record<string, unknown> | undefined): IpamConfig => {
  const result = right(decodeNadConfig(text, flat))
  if (result._tag !== "Whereabouts") throw new Error(`expected a whereabouts config, got ${result.ipamType}`)
  return result.config
}

/** A range as readable text: the normalised CIDR, bounds and excludes. */
const view = (r: IpRange) => ({
  range: r.range,
  start: r.rangeStart === undefined ? undefined : formatIP(r.rangeStart),
  end: r.rangeEnd === undefined ? undefined : formatIP(r.rangeEnd),
  exclude: r.exclude.map(formatCidr)
})

describe("decodeNadConfig: where the ipam object is", () => {
  it("reads a single plugin config", () => {
    const config = decode(nad({ range: "10.0.0.0/24" }))
    expect(config.ranges.map(view)).toStrictEqual([{ range: "10.0.0.0/24", start: undefined, end: undefined, exclude: [] }])
  })

  it("picks the whereabouts plugin of a config list even when it is not first", () => {
    const list = JSON.stringify({
      cniVersion: "0.3.1",
      name: "chain",
      plugins: [
        { type: "bridge", ipam: { type: "host-local", subnet: "10.9.0.0/16" } },
        { type: "macvlan", ipam: { type: "whereabouts", range: "10.1.0.0/16" } },
        { type: "tuning" }
      ]
    })
    expect(decode(list).ranges.map((r) => r.range)).toStrictEqual(["10.1.0.0/16"])
  })

  it.each([
    [JSON.stringify({ cniVersion: "0.3.1", name: "n", type: "macvlan", ipam: { type: "host-local", subnet: "10.0.0.0/24" } }), "host-local"],
    [JSON.stringify({ name: "n", plugins: [{ type: "bridge", ipam: { type: "dhcp" } }, { type: "tuning" }] }), "dhcp"],
    [JSON.stringify({ name: "n", type: "macvlan", ipam: {} }), ""]
  ])("another IPAM type is NotWhereabouts, not an error (%#)", (text, ipamType) => {
    expect(right(decodeNadConfig(text))).toStrictEqual({ _tag: "NotWhereabouts", ipamType })
  })
})

describe("decodeNadConfig: errors by reason", () => {
  it.each([
    ["EmptyConfig", undefined],
    ["EmptyConfig", ""],
    ["EmptyConfig", "  \n"],
    ["BadJson", "{"],
    ["BadJson", "not json"],
    ["MissingIpam", JSON.stringify({ cniVersion: "0.3.1", name: "n", type: "macvlan" })],
    ["MissingIpam", JSON.stringify({ name: "n", plugins: [{ type: "macvlan" }, { type: "tuning" }] })],
    ["BadSchema", "[]"],
    ["BadSchema", "null"],
    ["BadSchema", nad({ range: 5 })],
    ["BadSchema", nad({ range: "10.0.0.0/24", exclude: "10.0.0.1" })],
    ["BadSchema", nad({ range: "10.0.0.0/24", enable_overlapping_ranges: "yes" })],
    ["BadSchema", nad({ ipRanges: { range: "10.0.0.0/24" } })],
    ["MissingRange", nad({})],
    ["MissingRange", nad({ range: "", ipRanges: [] })],
    ["InvalidRange", nad({ range: "10.0.0.0/33" })],
    ["InvalidRange", nad({ range: "10.0.0.0" })],
    ["InvalidRange", nad({ range: "bogus" })],
    ["InvalidRange", nad({ range: "bogus-10.0.0.0/24" })],
    ["InvalidRange", nad({ range: "10.0.0.5-10.0.0.0/33" })],
    ["InvalidRange", nad({ ipRanges: [{ range: "10.0.0.0/24" }, { range: "fd00::/129" }] })],
    ["StartOutsideRange", nad({ range: "10.0.1.5-10.0.0.0/24" })],
    ["StartOutsideRange", nad({ range: "fd00::5-10.0.0.0/24" })],
    ["InvalidIP", nad({ ipRanges: [{ range: "10.0.0.0/24", range_start: "10.0.0.300" }] })],
    ["InvalidIP", nad({ ipRanges: [{ range: "10.0.0.0/24", range_end: "nope" }] })],
    ["BadExclude", nad({ range: "10.0.0.0/24", exclude: ["10.0.0.0/33"] })],
    ["BadExclude", nad({ range: "10.0.0.0/24", exclude: ["10.0.0.1", "bogus"] })],
    ["BadExclude", nad({ ipRanges: [{ range: "fd00::/64", exclude: ["fd00::/200"] }] })],
    // Upstream reads excludes and ipRanges bounds with Go's strict parser: a leading zero is refused.
    ["BadExclude", nad({ range: "10.0.0.0/24", exclude: ["10.0.0.01"] })],
    ["BadExclude", nad({ range: "10.0.0.0/24", exclude: ["10.0.0.010/30"] })],
    ["InvalidIP", nad({ ipRanges: [{ range: "10.0.0.0/24", range_start: "10.0.0.010" }] })]
  ])("%s: %j", (reason, text) => {
    const error = left(decodeNadConfig(text))
    expect(error._tag).toBe("IpamConfigError")
    expect(error.reason).toBe(reason)
    expect(error.message).not.toBe("")
  })

  it("a bad top-level range_start/range_end is silently ignored, as upstream does", () => {
    const [r] = decode(nad({ range: "10.0.0.0/24", range_start: "bogus", range_end: "10.0.0.300" })).ranges
    expect(view(r!)).toStrictEqual({ range: "10.0.0.0/24", start: undefined, end: undefined, exclude: [] })
  })
})

describe("decodeNadConfig: range normalisation", () => {
  it.each([
    ["192.168.2.230/24", { range: "192.168.2.0/24", start: undefined, end: undefined }],
    ["192.168.1.5-192.168.1.25/24", { range: "192.168.1.0/24", start: "192.168.1.5", end: "192.168.1.25" }],
    ["010.000.001.007/24", { range: "10.0.1.0/24", start: undefined, end: undefined }],
    ["192.168.001.005-192.168.001.025/24", { range: "192.168.1.0/24", start: "192.168.1.5", end: "192.168.1.25" }],
    ["2001:DB8:0:0::/64", { range: "2001:db8::/64", start: undefined, end: undefined }],
    ["2001:0db8:0000:0000:0000:0000:0000:0001/32", { range: "2001:db8::/32", start: undefined, end: undefined }],
    ["FD00::1-fd00::ff/120", { range: "fd00::/120", start: "fd00::1", end: "fd00::ff" }]
  ])("%s", (range, expected) => {
    const [r] = decode(nad({ range })).ranges
    expect(view(r!)).toStrictEqual({ ...expected, exclude: [] })
  })

  it("keeps in-config range_start and range_end (the allocator decides whether they apply)", () => {
    const [r] = decode(nad({ range: "10.0.0.0/24", range_start: "10.0.0.20", range_end: "010.0.0.030" })).ranges
    expect(view(r!)).toMatchObject({ start: "10.0.0.20", end: "10.0.0.30" })
  })

  it("exclude takes CIDRs (normalised) and bare IPs (/32, /128)", () => {
    const [r] = decode(nad({ range: "10.0.0.0/24", exclude: ["10.0.0.0/28", "10.0.0.200", "10.0.0.130/30", "fd00::5", "fd00::1:2/112"] })).ranges
    expect(view(r!).exclude).toStrictEqual(["10.0.0.0/28", "10.0.0.200/32", "10.0.0.128/30", "fd00::5/128", "fd00::1:0/112"])
  })

  it("ipRanges: the top-level range comes first and keeps the top-level exclude to itself", () => {
    const config = decode(
      nad({
        range: "10.0.0.0/24",
        exclude: ["10.0.0.1"],
        ipRanges: [{ range: "fd00::/64", range_start: "fd00::10", exclude: ["fd00::1"] }, { range: "10.1.0.0/16" }]
      })
    )
    expect(config.ranges.map(view)).toStrictEqual([
      { range: "10.0.0.0/24", start: undefined, end: undefined, exclude: ["10.0.0.1/32"] },
      { range: "fd00::/64", start: "fd00::10", end: undefined, exclude: ["fd00::1/128"] },
      { range: "10.1.0.0/16", start: undefined, end: undefined, exclude: [] }
    ])
  })
})

describe("decodeNadConfig: options", () => {
  it.each([
    [{}, ""],
    [{ network_name: "test" }, "test"]
  ])("network_name %j", (extra, expected) => {
    expect(decode(nad({ range: "10.0.0.0/8", ...extra })).networkName).toBe(expected)
  })

  it.each([
    [{}, true],
    [{ enable_overlapping_ranges: false }, false],
    [{ enable_overlapping_ranges: true }, true]
  ])("enable_overlapping_ranges %j → %s (default true)", (extra, expected) => {
    expect(decode(nad({ range: "10.0.0.0/8", ...extra })).enableOverlappingRanges).toBe(expected)
  })

  it("reconciler_cron_expression is passed on; absent means the default schedule", () => {
    expect(decode(nad({ range: "10.0.0.0/8", reconciler_cron_expression: "*/5 * * * *" })).reconcilerCronExpression).toBe("*/5 * * * *")
    expect(decode(nad({ range: "10.0.0.0/8" })).reconcilerCronExpression).toBeUndefined()
    expect(DEFAULT_RECONCILER_CRON).toBe("30 4 * * *")
  })
})

describe("decodeNadConfig: flat file", () => {
  const flatFile = {
    range: "10.9.0.0/16",
    network_name: "flat",
    enable_overlapping_ranges: false,
    reconciler_cron_expression: "0 1 * * *",
    exclude: ["10.0.0.1"]
  }

  it("looks at configuration_path first, then the three contract paths in order", () => {
    const asked: Array<ReadonlyArray<string>> = []
    const spy = (paths: ReadonlyArray<string>) => (asked.push(paths), undefined)
    decode(nad({ range: "10.0.0.0/8" }), spy)
    decode(nad({ range: "10.0.0.0/8", configuration_path: "/opt/wb/whereabouts.conf" }), spy)
    expect(asked).toStrictEqual([CONTRACT_PATHS, ["/opt/wb/whereabouts.conf", ...CONTRACT_PATHS]])
  })

  it("a missing flat file is fine", () => {
    expect(decode(nad({ range: "10.0.0.0/8" }), () => undefined).ranges.map((r) => r.range)).toStrictEqual(["10.0.0.0/8"])
  })

  it("fills only what the NAD leaves empty, and never enable_overlapping_ranges", () => {
    const config = decode(nad({ range: "10.0.0.0/24" }), () => flatFile)
    expect(config.ranges.map(view)).toStrictEqual([{ range: "10.0.0.0/24", start: undefined, end: undefined, exclude: ["10.0.0.1/32"] }])
    expect(config.networkName).toBe("flat")
    expect(config.reconcilerCronExpression).toBe("0 1 * * *")
    expect(config.enableOverlappingRanges).toBe(true)
  })

  it("the NAD wins over the flat file", () => {
    const config = decode(
      nad({ range: "10.0.0.0/24", network_name: "nad", reconciler_cron_expression: "1 2 * * *", exclude: ["10.0.0.9"], enable_overlapping_ranges: false }),
      () => ({ ...flatFile, enable_overlapping_ranges: true })
    )
    expect(config.networkName).toBe("nad")
    expect(config.reconcilerCronExpression).toBe("1 2 * * *")
    expect(view(config.ranges[0]!).exclude).toStrictEqual(["10.0.0.9/32"])
    expect(config.enableOverlappingRanges).toBe(false)
  })

  it("a NAD without a range takes the flat file's", () => {
    expect(decode(nad({}), () => flatFile).ranges.map((r) => r.range)).toStrictEqual(["10.9.0.0/16"])
  })

  it("is not consulted for other IPAM types", () => {
    let called = false
    const text = JSON.stringify({ name: "n", type: "macvlan", ipam: { type: "static" } })
    expect(right(decodeNadConfig(text, () => ((called = true), flatFile)))._tag).toBe("NotWhereabouts")
    expect(called).toBe(false)
  })
})
