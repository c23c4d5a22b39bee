/**
 * Evidence for the cold lowest-free miss (BENCHMARKS.md): the unavoidable steps of a search over a
 * JSON-decoded pool of 100k allocations, timed one by one on their first run in a fresh process,
 * written inline (no function boundaries to compile):
 *
 *   node bench/children/lowest-free-phases.ts [allocations]
 *
 * keys: Object.keys (V8 keeps integer-like keys as elements and makes a string of each);
 * values: Object.values; scan: the idempotency check over every entry; offsets: key → number;
 * lowestFree: `lowestFreeOffset` (bitmap) over those offsets.
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
const keys = Object.keys(allocations)
mark("keys")
const values = Object.values(allocations)
mark("values")
let matches = 0
for (let i = 0; i < values.length; i++) {
  const a = values[i]!
  if (a.podref === "ns/new" && (a.ifname ?? "") === "net1") matches++
}
mark("scan")
const offsets = new Float64Array(keys.length)
let m = 0
for (const key of keys) {
  const rel = Number(key) - 1
  if (rel >= 0) offsets[m++] = rel
}
mark("offsets")
const free = lowestFreeOffset((1n << 64n) - 3n, offsets.subarray(0, m), [])
mark("lowestFree")
process.stdout.write(`${JSON.stringify({ allocations: n, phasesMs: phases, totalMs: Object.values(phases).reduce((a, b) => a + b, 0), matches, free: String(free) })}\n`)
