/**
 * The lowest free address of a big pool, cold (first call in this fresh process, JIT cold) and
 * warm (median of later calls):
 *
 *   node [--expose-gc] bench/children/lowest-free.ts <case> <ours|core|baseline> [settled [pause-ms]]
 *
 * ours: `assignIP`, what the CNI plugin runs (one walk asking the pool for offset 1, 2, … that
 * checks each entry against the request and notes the first free offset; when the walk cannot
 * settle both, the idempotency scan over the values and a second search); core:
 * `lowestFreeOffset`, the bitmap search over every key's offset (assignIP's fallback when an
 * offset could pass 2^53), without the idempotency check; baseline: the anchors' search (format
 * every candidate, look it up in a set of reserved IP strings). The cases are below.
 * Also reports the garbage-collection time that fell inside the cold call; "settled" (with
 * --expose-gc) collects the garbage of building the pool first, and a pause after that lets the
 * process idle before the cold call (both disturb more than they remove: BENCHMARKS.md).
 */
import { PerformanceObserver } from "node:perf_hooks"
import { Either } from "effect"
import { assignIP, lowestFreeOffset } from "../../src/testing/allocate.ts"
import { parseCidr } from "../../src/domain/ip.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import type { IPAllocation } from "../../src/domain/pool.ts"
import { naiveLowestFree } from "../baseline.ts"

// Offsets of the allocations: dense from the first address (the worst case for the search: the
// answer lies past every entry), every fourth left free (a pool after churn), or one in six
// (sparse: the walk gives up and assignIP scans the values, then probes).
const cases = {
  "v4-16-10k": { range: "10.20.0.0/16", n: 10_000, offset: (i: number) => i },
  "v6-64-100k": { range: "2001:db8:1::/64", n: 100_000, offset: (i: number) => i },
  "v4-16-10k-holes": { range: "10.20.0.0/16", n: 10_000, offset: (i: number) => i + Math.floor((i - 1) / 3) },
  "v4-16-10k-sparse": { range: "10.20.0.0/16", n: 10_000, offset: (i: number) => 1 + (i - 1) * 6 }
} as const
const which = (process.argv[2] ?? "v4-16-10k") as keyof typeof cases
const impl = process.argv[3] ?? "ours"
const { range, n, offset } = cases[which]

// The pool as the plugin reads it: JSON decoded from the API.
const raw: Record<string, IPAllocation> = {}
for (let i = 1; i <= n; i++) raw[String(offset(i))] = { id: `c${i.toString(16).padStart(63, "0")}`, podref: `ns/pod-${i}`, ifname: "net1" }
const allocations = JSON.parse(JSON.stringify(raw)) as Record<string, IPAllocation>
const decoded = decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name: "n", type: "macvlan", ipam: { type: "whereabouts", range } }))
if (Either.isLeft(decoded) || decoded.right._tag !== "Whereabouts") throw new Error("bad config")
const ipRange = decoded.right.config.ranges[0]!
const cidr = parseCidr(range)!
const request = { id: "new", podref: "ns/new", ifname: "net1" }

const once = (): string => {
  switch (impl) {
    case "core": {
      const reserved = Float64Array.from(Object.keys(allocations), (k) => Number(k) - 1)
      return String(lowestFreeOffset((1n << BigInt((cidr.family === 4 ? 32 : 128) - cidr.prefix)) - 3n, reserved, []))
    }
    case "baseline":
      return naiveLowestFree(range, allocations) ?? "none"
    default: {
      const out = assignIP(ipRange, cidr, allocations, request)
      return Either.isRight(out) ? out.right.key : "none"
    }
  }
}

const gcs: Array<{ readonly start: number; readonly duration: number }> = []
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcs.push({ start: e.startTime, duration: e.duration })
})
observer.observe({ entryTypes: ["gc"] })
if (process.argv[4] === "settled") {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("settled needs --expose-gc")
  gc()
  gc()
  // An optional pause after them (ms): the process idles before the cold call.
  const pause = Number(process.argv[5] ?? 0)
  if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause))
}
const t0 = performance.now()
const answer = once()
const cold = performance.now() - t0
// GC entries arrive asynchronously: wait a tick before reading those inside the cold call.
await new Promise((resolve) => setTimeout(resolve, 50))
observer.disconnect()
const coldGcMs = gcs.filter((g) => g.start >= t0 && g.start < t0 + cold).reduce((a, g) => a + g.duration, 0)
const warm: Array<number> = []
// Up to 30 calls, but no more than ~3 s of them (the baseline's /64 search takes most of a second).
for (let i = 0, spent = 0; i < 30 && (i < 3 || spent < 3000); i++) {
  const t = performance.now()
  once()
  warm.push(performance.now() - t)
  spent += warm[warm.length - 1]!
}
warm.sort((a, b) => a - b)
// min: the least disturbed run on a shared machine; median for the typical one.
process.stdout.write(`${JSON.stringify({ case: which, impl, n, answer, settled: process.argv[4] === "settled", coldMs: cold, coldGcMs, warmMinMs: warm[0], warmMedianMs: warm[Math.floor(warm.length / 2)] })}\n`)
