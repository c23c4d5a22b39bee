/** Just enough of the Prometheus text format to read counters back (the parser: src/testing/prom.ts). */
import { type Sample, sum } from "../../src/testing/prom.ts"

export { parseProm, type Sample, sum } from "../../src/testing/prom.ts"

/** `after - before` per label set of one metric, keyed by the given labels joined with " ". */
export const delta = (before: ReadonlyArray<Sample>, after: ReadonlyArray<Sample>, name: string, keys: ReadonlyArray<string>): Record<string, number> => {
  const acc: Record<string, number> = {}
  const add = (samples: ReadonlyArray<Sample>, sign: number) => {
    for (const s of samples) {
      if (s.name !== name) continue
      const k = keys.map((key) => s.labels[key] ?? "").join(" ")
      acc[k] = (acc[k] ?? 0) + sign * s.value
    }
  }
  add(after, 1)
  add(before, -1)
  for (const k of Object.keys(acc)) if (acc[k] === 0) delete acc[k]
  return acc
}

/**
 * Quantiles of a histogram's observations between two scrapes (`name` without `_bucket`), over
 * the series whose labels match `filter`, interpolated linearly inside a bucket as Prometheus'
 * histogram_quantile does (p50, p95, p99); also the count and mean. Undefined when nothing was observed.
 */
export const histogramBetween = (
  before: ReadonlyArray<Sample>,
  after: ReadonlyArray<Sample>,
  name: string,
  filter: Readonly<Record<string, string>>
): { readonly count: number; readonly mean: number; readonly quantiles: ReadonlyArray<number> } | undefined => {
  const ok = (l: Readonly<Record<string, string>>) => Object.entries(filter).every(([k, v]) => l[k] === v)
  const buckets = new Map<number, number>()
  for (const [samples, sign] of [[after, 1], [before, -1]] as const) {
    for (const s of samples) {
      if (s.name !== `${name}_bucket` || !ok(s.labels)) continue
      const le = s.labels["le"] === "+Inf" ? Number.POSITIVE_INFINITY : Number(s.labels["le"])
      buckets.set(le, (buckets.get(le) ?? 0) + sign * s.value)
    }
  }
  const sorted = [...buckets].sort((a, b) => a[0] - b[0])
  const count = sorted.at(-1)?.[1] ?? 0
  if (count <= 0) return undefined
  const total = sum(after, `${name}_sum`, ok) - sum(before, `${name}_sum`, ok)
  const quantiles = [0.5, 0.95, 0.99].map((q) => {
    const rank = q * count
    let prevLe = 0
    let prevCount = 0
    for (const [le, c] of sorted) {
      if (c >= rank) {
        if (le === Number.POSITIVE_INFINITY) return prevLe
        return prevLe + ((le - prevLe) * (rank - prevCount)) / Math.max(1e-9, c - prevCount)
      }
      prevLe = le
      prevCount = c
    }
    return prevLe
  })
  return { count, mean: total / count, quantiles }
}
