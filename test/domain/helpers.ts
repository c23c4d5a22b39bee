/** Small builders shared by the domain tests (not a test file: vitest only picks up *.test.ts). */
import { Either, FastCheck as fc } from "effect"
import { type Cidr, type IPAddress, formatCidr, parseCidr, parseIP, toNetworkForm } from "../../src/domain/ip.ts"
import { type Snapshot, poolNaming } from "../../src/domain/holdings.ts"
import { type DecodedNad, type IpRange, decodeNadConfig } from "../../src/domain/ipam-config.ts"
import type { NodeSlicePoolRecord } from "../../src/domain/node-slices.ts"
import type { ParsedPool, ReservationRecord } from "../../src/domain/pool.ts"

/** Parses a literal IP of the test itself; throws on a typo so a test never passes on `undefined`. */
export const ip = (text: string): IPAddress => {
  const parsed = parseIP(text)
  if (parsed === undefined) throw new Error(`test IP does not parse: ${text}`)
  return parsed
}

export const cidr = (text: string): Cidr => {
  const parsed = parseCidr(text)
  if (parsed === undefined) throw new Error(`test CIDR does not parse: ${text}`)
  return parsed
}

export const right = <A, E>(e: Either.Either<A, E>): A => {
  if (Either.isLeft(e)) throw new Error(`expected Right, got Left: ${JSON.stringify(e.left)}`)
  return e.right
}

export const left = <A, E>(e: Either.Either<A, E>): E => {
  if (Either.isRight(e)) throw new Error(`expected Left, got Right: ${String(e.right)}`)
  return e.left
}

/** An IpRange as the config decoder produces it (network form, normalised excludes). */
export const ipRange = (
  range: string,
  opts: { readonly start?: string; readonly end?: string; readonly exclude?: ReadonlyArray<string> } = {}
): IpRange => {
  const net = toNetworkForm(cidr(range))
  return {
    range: formatCidr(net),
    cidr: net,
    ...(opts.start === undefined ? {} : { rangeStart: ip(opts.start) }),
    ...(opts.end === undefined ? {} : { rangeEnd: ip(opts.end) }),
    exclude: (opts.exclude ?? []).map((e) => toNetworkForm(cidr(e.includes("/") ? e : `${e}/${e.includes(":") ? 128 : 32}`)))
  }
}

/** A 16-bit group, zero most of the time so that runs of zero groups are common. */
const group = fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 0, max: 0xffff }) })

/** 128-bit values built from eight groups with many zeros (the interesting cases for `::`). */
export const ipv6Value: fc.Arbitrary<bigint> = fc.oneof(
  fc.array(group, { minLength: 8, maxLength: 8 }).map((gs) => gs.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n)),
  fc.bigInt({ min: 0n, max: (1n << 128n) - 1n })
)

export const ipv4Value: fc.Arbitrary<bigint> = fc.bigInt({ min: 0n, max: 0xffffffffn })

export const anyIP: fc.Arbitrary<IPAddress> = fc.oneof(
  ipv4Value.map((value): IPAddress => ({ family: 4, value })),
  ipv6Value.map((value): IPAddress => ({ family: 6, value }))
)

/** JSON.stringify that tolerates bigint (for failure messages). */
export const show = (u: unknown): string => JSON.stringify(u, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))

/** A snapshot of plain lists, as the sweep's listing makes one (NAD configs decoded already). */
export const listSnapshot = (
  pools: ReadonlyArray<ParsedPool>,
  reservations: ReadonlyArray<ReservationRecord>,
  nads: ReadonlyArray<DecodedNad> = [],
  nodeSlicePools: ReadonlyArray<NodeSlicePoolRecord> = []
): Snapshot => ({
  pool: (name) => pools.find((p) => p.name === name),
  poolsHeldBy: (ref) => pools.filter((p) => p.entries.some((e) => e.podref === ref)),
  reservation: (name) => reservations.find((r) => r.name === name),
  reservationsHeldBy: (ref) => reservations.filter((r) => r.podref === ref),
  nad: (namespace, name) => nads.find((n) => n.namespace === namespace && n.name === name)?.config,
  ...poolNaming(nads, nodeSlicePools)
})

/** A NAD of namespace/name whose config is a macvlan network with this whereabouts IPAM, decoded. */
export const whereaboutsNad = (name: string, ipam: Record<string, unknown>, namespace = "default") => ({
  namespace,
  name,
  config: decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name, type: "macvlan", ipam: { type: "whereabouts", ...ipam } }))
})
