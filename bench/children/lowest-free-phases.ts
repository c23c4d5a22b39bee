/**
 * Evidence for the cold lowest-free numbers (BENCHMARKS.md): one step of the searches over a
 * JSON-decoded pool, timed on its first run in a fresh process (one process per step, so no step
 * runs on code another step warmed up):
 *
 *   node bench/children/lowest-free-phases.ts <allocations> <dense|sparse> <step>
 *
 * dense: offsets 1 … n (what lowest-first allocation makes); sparse: every sixth address.
 * Steps of assignIP: values (Object.values), walk (one pass asking the pool for offset 1, 2, …
 * that checks each entry against the request and notes the first free offset, giving up in a
 * sparse pool as assignIP does), then, when the walk cannot settle, scan (the idempotency check
 * over the values) and probe (ask for offset 1, 2, … until one is missing). The search over
 * every key (assignIP's fallback for offsets past 2^53): keys (Object.keys: a string per key),
 * offsets (key → number) and bitmap (`lowestFreeOffset`). Steps a step needs are done first,
 * untimed.
 */
import { lowestFreeOffset } from "../../src/testing/allocate.ts"

type Entry = { readonly podref: string; readonly ifname?: string }
const n = Number(process.argv[2] ?? 10_000)
const shape = process.argv[3] ?? "dense"
const step = process.argv[4] ?? "walk"
const offsetOf = (i: number) => (shape === "sparse" ? 1 + (i - 1) * 6 : i)
const raw: Record<string, unknown> = {}
for (let i = 1; i <= n; i++) raw[String(offsetOf(i))] = { id: `c${i.toString(16).padStart(63, "0")}`, podref: `ns/pod-${i}`, ifname: "net1" }
const allocations = JSON.parse(JSON.stringify(raw)) as Record<string, Entry>
const podref = "ns/new"
const ifname = "net1"

const values = (): ReadonlyArray<Entry> => Object.values(allocations)
const walk = (count: number) => {
  let met = 0
  let matched = false
  let free = -1
  let rel = 0
  while (rel - met <= (met >> 1) + 16) {
    let at = 1 + rel
    let a = allocations[at]
    while (a !== undefined) {
      if (a.podref === podref && (a.ifname ?? "") === ifname) matched = true
      a = allocations[++at]
    }
    met += at - 1 - rel
    rel = at - 1
    if (free < 0) free = rel
    if (met >= count) break
    rel++
  }
  return { settled: met === count && !matched, free }
}
const scan = (vs: ReadonlyArray<Entry>) => {
  let matches = 0
  for (let i = 0, k = vs.length; i < k; i++) {
    const a = vs[i]!
    if (a.podref === podref && (a.ifname ?? "") === ifname) matches++
  }
  return matches
}
const probe = () => {
  let rel = 0
  while (allocations[1 + rel] !== undefined) rel++
  return rel
}
const keys = () => Object.keys(allocations)
const offsets = (ks: ReadonlyArray<string>) => {
  const out = new Float64Array(ks.length)
  let m = 0
  for (const key of ks) {
    const rel = Number(key) - 1
    if (rel >= 0) out[m++] = rel
  }
  return out.subarray(0, m)
}
const bitmap = (os: Float64Array) => lowestFreeOffset((1n << 64n) - 3n, os, [])

const timed = (f: () => unknown): { readonly ms: number; readonly out: unknown } => {
  const t = performance.now()
  const out = f()
  return { ms: performance.now() - t, out }
}
const steps: Record<string, () => { readonly ms: number; readonly out: unknown }> = {
  values: () => timed(values),
  walk: () => {
    const count = values().length
    return timed(() => walk(count))
  },
  scan: () => {
    const vs = values()
    return timed(() => scan(vs))
  },
  probe: () => timed(probe),
  keys: () => timed(keys),
  offsets: () => {
    const ks = keys()
    return timed(() => offsets(ks))
  },
  bitmap: () => {
    const os = offsets(keys())
    return timed(() => String(bitmap(os)))
  }
}
const run = steps[step]
if (run === undefined) throw new Error(`unknown step ${step}: one of ${Object.keys(steps).join(", ")}`)
const { ms, out } = run()
// What the step produced, small: the walk's verdict, a number, or a length.
const summary = typeof out === "object" && out !== null && "length" in out ? { length: (out as { length: number }).length } : out
process.stdout.write(`${JSON.stringify({ allocations: n, shape, step, ms, out: summary })}\n`)
