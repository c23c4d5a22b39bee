/**
 * Evidence for the cold lowest-free numbers (BENCHMARKS.md): the steps of the two ways to search a
 * JSON-decoded pool, timed one by one on their first run in a fresh process, written inline (no
 * function boundaries to compile):
 *
 *   node bench/children/lowest-free-phases.ts [allocations]
 *
 * What assignIP does: values (Object.values), scan (the idempotency check over every entry),
 * probe (ask the pool for offset 1, 2, … until one is missing: a numeric element lookup, no
 * string made). What it did before, and still does for offsets past 2^53: keys (Object.keys:
 * V8 keeps integer-like keys as elements and makes a string of each), offsets (key → number),
 * bitmap (`lowestFreeOffset` over those offsets).
 */
import { lowestFreeOffset } from "../../src/domain/allocate.ts"

const n = Number(process.argv[2] ?? 100_000)
const raw: Record<string, unknown> = {}
for (let i = 1; i <= n; i++) raw[String(i)] = { id: `c${i.toString(16).padStart(63, "0")}`, podref: `ns/pod-${i}`, ifname: "net1" }
const allocations = JSON.parse(JSON.stringify(raw)) as Record<string, { podref: string; ifname?: string }>
const phases: Record<string, number> = {}
let since = performance.now()
const mark = (label: string) => {
  const now = performance.now()
  phases[label] = Math.round((now - since) * 100) / 100
  since = now
}
// The search assignIP makes.
const values = Object.values(allocations)
mark("values")
let matches = 0
for (let i = 0; i < values.length; i++) {
  const a = values[i]!
  if (a.podref === "ns/new" && (a.ifname ?? "") === "net1") matches++
}
mark("scan")
let probed = 0
while (allocations[1 + probed] !== undefined) probed++
mark("probe")
// The search over every key (the fallback beyond 2^53).
const keys = Object.keys(allocations)
mark("keys")
const offsets = new Float64Array(keys.length)
let m = 0
for (const key of keys) {
  const rel = Number(key) - 1
  if (rel >= 0) offsets[m++] = rel
}
mark("offsets")
const free = lowestFreeOffset((1n << 64n) - 3n, offsets.subarray(0, m), [])
mark("bitmap")
const total = (...steps: ReadonlyArray<string>) => Math.round(steps.reduce((a, s) => a + phases[s]!, 0) * 100) / 100
process.stdout.write(
  `${JSON.stringify({ allocations: n, phasesMs: phases, probeTotalMs: total("values", "scan", "probe"), keysTotalMs: total("values", "scan", "keys", "offsets", "bitmap"), matches, free: String(free), probed })}\n`
)
