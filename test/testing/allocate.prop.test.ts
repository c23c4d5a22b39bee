/**
 * Property tests of assignIP against oracles written here: a brute-force scan of every address
 * for small ranges, and a candidate-point search for ranges far wider than 2^53.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import { type Allocations, assignIP, withAssignment } from "../../src/testing/allocate.ts"
import { type Cidr, type Family, type IPAddress, bitsOf, toNetworkForm } from "../../src/domain/ip.ts"
import type { IpRange } from "../../src/domain/ipam-config.ts"
import { show } from "../domain/helpers.ts"

interface Case {
  readonly family: Family
  readonly network: bigint
  readonly prefix: number
  /** spec.range's address (network + shift): pool keys count from here. */
  readonly base: bigint
  readonly rangeStart: bigint | undefined
  readonly rangeEnd: bigint | undefined
  readonly exclude: ReadonlyArray<Cidr>
  readonly keys: ReadonlyArray<bigint>
  readonly also: ReadonlyArray<bigint>
}

const top = (family: Family) => (1n << BigInt(bitsOf(family))) - 1n
const inFamily = (family: Family, v: bigint) => v >= 0n && v <= top(family)
const contains = (c: Cidr, v: bigint) => {
  const n = toNetworkForm(c).address
  return v >= n && v < n + (1n << BigInt(bitsOf(c.family) - c.prefix))
}

/** What the contract says the allocatable window is (usable range narrowed by valid bounds). */
const window = (c: Case): { lo: bigint; hi: bigint } => {
  const size = 1n << BigInt(bitsOf(c.family) - c.prefix)
  let lo = c.network + 1n
  let hi = c.network + size - 2n
  if (c.rangeStart !== undefined && c.rangeStart >= lo && c.rangeStart <= hi) lo = c.rangeStart
  if (c.rangeEnd !== undefined && c.rangeEnd >= lo && c.rangeEnd <= hi) hi = c.rangeEnd
  return { lo, hi }
}

const reservedSet = (c: Case) => new Set([...c.keys.map((k) => c.base + k), ...c.also])
const blocked = (c: Case, reserved: Set<bigint>, v: bigint) => reserved.has(v) || c.exclude.some((x) => contains(x, v))

/** Brute force: walk every address of the CIDR. */
const bruteForce = (c: Case): bigint | undefined => {
  const size = 1n << BigInt(bitsOf(c.family) - c.prefix)
  const { lo, hi } = window(c)
  const reserved = reservedSet(c)
  for (let v = c.network; v < c.network + size; v++) {
    if (v >= lo && v <= hi && !blocked(c, reserved, v)) return v
  }
  return undefined
}

/** The lowest free address is the window's start or right after something blocked. */
const candidates = (c: Case): bigint | undefined => {
  const { lo, hi } = window(c)
  const reserved = reservedSet(c)
  const points = [lo, ...[...reserved].map((v) => v + 1n), ...c.exclude.map((x) => toNetworkForm(x).address + (1n << BigInt(bitsOf(x.family) - x.prefix)))]
  const free = points.filter((v) => v >= lo && v <= hi && !blocked(c, reserved, v))
  return free.length === 0 ? undefined : free.reduce((a, b) => (a < b ? a : b))
}

const toRange = (c: Case): IpRange => {
  const cidr: Cidr = { family: c.family, address: c.network, prefix: c.prefix }
  const at = (v: bigint | undefined): IPAddress | undefined => (v === undefined ? undefined : { family: c.family, value: v })
  const rangeStart = at(c.rangeStart)
  const rangeEnd = at(c.rangeEnd)
  return {
    range: `${c.network}/${c.prefix}`,
    cidr,
    ...(rangeStart === undefined ? {} : { rangeStart }),
    ...(rangeEnd === undefined ? {} : { rangeEnd }),
    exclude: c.exclude
  }
}

const run = (c: Case) => {
  const allocations: Allocations = Object.fromEntries(c.keys.map((k) => [k.toString(), { id: `c${k}`, podref: `ns/p${k}`, ifname: "net1" }]))
  const result = assignIP(
    toRange(c),
    { family: c.family, address: c.base, prefix: c.prefix },
    allocations,
    { id: "new", podref: "ns/new", ifname: "net1" },
    c.also.map((value) => ({ family: c.family, value }))
  )
  return { allocations, result }
}

const check = (c: Case, expected: bigint | undefined) => {
  const { allocations, result } = run(c)
  if (expected === undefined) {
    expect(Either.isLeft(result), show(c)).toBe(true)
    return
  }
  if (Either.isLeft(result)) throw new Error(`expected ${expected}, got ${result.left.message} for ${show(c)}`)
  const { ip, key } = result.right
  const { lo, hi } = window(c)
  expect(ip.value, show(c)).toBe(expected)
  expect(ip.value >= lo && ip.value <= hi).toBe(true)
  expect(c.exclude.some((x) => contains(x, ip.value))).toBe(false)
  expect(reservedSet(c).has(ip.value)).toBe(false)
  expect(key).toBe((ip.value - c.base).toString())
  expect(withAssignment(allocations, result.right)).toStrictEqual({ ...allocations, [key]: { id: "new", podref: "ns/new", ifname: "net1" } })
}

/** A small range: IPv4 /24–/30 or IPv6 /120–/126, with bounds, excludes and reservations around it. */
const smallCase: fc.Arbitrary<Case> = fc
  .oneof(
    fc.tuple(fc.constant<Family>(4), fc.bigInt({ min: 0n, max: top(4) }), fc.integer({ min: 24, max: 30 })),
    fc.tuple(fc.constant<Family>(6), fc.bigInt({ min: 0n, max: top(6) }), fc.integer({ min: 120, max: 126 }))
  )
  .chain(([family, raw, prefix]) => {
    const network = toNetworkForm({ family, address: raw, prefix }).address
    const size = 1 << (bitsOf(family) - prefix)
    const near = fc.integer({ min: -3, max: size + 2 }).map((o) => network + BigInt(o))
    const bound = fc.option(near.filter((v) => inFamily(family, v)), { nil: undefined })
    const exclude = fc.record({ at: near, prefix: fc.integer({ min: prefix - 1, max: bitsOf(family) }) })
      .filter((x) => inFamily(family, x.at))
      .map((x): Cidr => toNetworkForm({ family, address: x.at, prefix: x.prefix }))
    return fc.record({
      family: fc.constant(family),
      network: fc.constant(network),
      prefix: fc.constant(prefix),
      base: fc.oneof({ weight: 3, arbitrary: fc.constant(network) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: size - 1 }).map((o) => network + BigInt(o)) }),
      rangeStart: bound,
      rangeEnd: bound,
      exclude: fc.array(exclude, { maxLength: 3 }),
      keys: fc.uniqueArray(fc.integer({ min: 0, max: size + 2 }), { maxLength: size }).map((ks) => ks.map(BigInt)),
      also: fc.uniqueArray(fc.integer({ min: 0, max: size - 1 }), { maxLength: 4 }).map((os) => os.map((o) => network + BigInt(o)))
    })
  })
  .filter((c) => c.keys.every((k) => inFamily(c.family, c.base + k)))

/** A /64 or /48 whose exclusions reach far past 2^53 from its start, with reservations right after them. */
const wideCase: fc.Arbitrary<Case> = fc
  .tuple(fc.bigInt({ min: 0n, max: top(6) }), fc.constantFrom(48, 64))
  .chain(([raw, prefix]) => {
    const network = toNetworkForm({ family: 6, address: raw, prefix }).address
    const span = 1n << BigInt(128 - prefix)
    const big = fc.bigInt({ min: 0n, max: span - 1n })
    const exclude = fc.tuple(big, fc.integer({ min: prefix + 1, max: 128 })).map(([o, p]): Cidr => toNetworkForm({ family: 6, address: network + o, prefix: p }))
    const first = fc.integer({ min: prefix + 1, max: 74 }).map((p): Cidr => ({ family: 6, address: network, prefix: p }))
    return fc.record({
      family: fc.constant<Family>(6),
      network: fc.constant(network),
      prefix: fc.constant(prefix),
      base: fc.constant(network),
      rangeStart: fc.option(big.map((o) => network + o), { nil: undefined, freq: 4 }),
      rangeEnd: fc.option(big.map((o) => network + o), { nil: undefined, freq: 2 }),
      exclude: fc.tuple(first, fc.array(exclude, { maxLength: 3 })).map(([f, rest]) => [f, ...rest]),
      keys: fc.constant<ReadonlyArray<bigint>>([]),
      also: fc.constant<ReadonlyArray<bigint>>([])
    })
  })
  .chain((c) => {
    // Reserve a few addresses right after each exclusion (and the window start) to force skipping in BigInt.
    const ends = [window(c).lo - 1n, ...c.exclude.map((x) => toNetworkForm(x).address + (1n << BigInt(128 - x.prefix)) - 1n)]
    const after = fc.tuple(fc.constantFrom(...ends), fc.integer({ min: 1, max: 3 })).map(([e, d]) => e + BigInt(d))
    return fc.record({ keys: fc.uniqueArray(after, { maxLength: 6 }), also: fc.uniqueArray(after, { maxLength: 2 }) }).map(({ keys, also }) => ({
      ...c,
      keys: keys.filter((v) => v >= c.base && v <= top(6)).map((v) => v - c.base),
      also
    }))
  })

/** Pools whose entries belong to a few pods on two interfaces, and a request of one of them (or a new pod). */
const ownedCase = smallCase.chain((c) =>
  fc.record({
    c: fc.constant(c),
    owners: fc.array(fc.record({ pod: fc.integer({ min: 0, max: 3 }), ifname: fc.constantFrom<string | undefined>("net1", "net2", undefined) }), {
      minLength: c.keys.length,
      maxLength: c.keys.length
    }),
    request: fc.record({ pod: fc.integer({ min: 0, max: 4 }), ifname: fc.constantFrom("net1", "net2", "") })
  })
)

describe("assignIP properties", () => {
  it.prop("idempotent ADD: the first entry of the pod and ifname in Object.values order under a numeric key, else the lowest free address", [ownedCase], ([{ c, owners, request }]) => {
    const allocations: Allocations = Object.fromEntries(
      c.keys.map((k, i) => [k.toString(), { id: `c${k}`, podref: `ns/p${owners[i]!.pod}`, ...(owners[i]!.ifname === undefined ? {} : { ifname: owners[i]!.ifname }) }])
    )
    const wanted = { id: "new", podref: `ns/p${request.pod}`, ifname: request.ifname }
    const result = assignIP(toRange(c), { family: c.family, address: c.base, prefix: c.prefix }, allocations, wanted, c.also.map((value) => ({ family: c.family, value })))
    const own = Object.entries(allocations).find(([k, a]) => /^(0|[1-9][0-9]*)$/.test(k) && a.podref === wanted.podref && (a.ifname ?? "") === wanted.ifname)
    if (own !== undefined) {
      expect(Either.getOrThrow(result), show(c)).toMatchObject({ key: own[0], existing: true, ip: { value: c.base + BigInt(own[0]) }, entry: { ...own[1], id: "new" } })
      return
    }
    const expected = bruteForce(c)
    if (expected === undefined) expect(Either.isLeft(result), show(c)).toBe(true)
    else expect(Either.getOrThrow(result), show(c)).toMatchObject({ existing: false, ip: { value: expected } })
  }, { fastCheck: { numRuns: 1500 } })


  it.prop("small ranges: the brute-force lowest free address, or exhaustion exactly when none is free", [smallCase], ([c]) => {
    check(c, bruteForce(c))
  }, { fastCheck: { numRuns: 1500 } })

  it.prop("the two oracles agree on small ranges", [smallCase], ([c]) => {
    expect(candidates(c), show(c)).toBe(bruteForce(c))
  }, { fastCheck: { numRuns: 300 } })

  it.prop("wide IPv6 ranges: exclusions and reservations beyond 2^53 are honoured", [wideCase], ([c]) => {
    check(c, candidates(c))
  }, { fastCheck: { numRuns: 1000 } })
})
