/** Just enough of the Prometheus text format to read counters back. */

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

/** Samples of the metrics whose name passes `want` (all by default). */
export const parseProm = (text: string, want: (name: string) => boolean = () => true): Array<Sample> => {
  const out: Array<Sample> = []
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const m = LINE.exec(line)
    if (m === null || !want(m[1]!)) continue
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? "").matchAll(LABEL)) labels[l[1]!] = l[2]!
    out.push({ name: m[1]!, labels, value: Number(m[3]) })
  }
  return out
}

/** Sum of the samples named `name` whose labels match `filter` (a predicate or exact values). */
export const sum = (samples: ReadonlyArray<Sample>, name: string, filter: Readonly<Record<string, string>> | ((l: Readonly<Record<string, string>>) => boolean) = {}): number => {
  const ok = typeof filter === "function" ? filter : (l: Readonly<Record<string, string>>) => Object.entries(filter).every(([k, v]) => l[k] === v)
  return samples.filter((s) => s.name === name && ok(s.labels)).reduce((a, s) => a + s.value, 0)
}

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
 * histogram_quantile does; also the count and mean. Undefined when nothing was observed.
 */
export const histogramBetween = (
  before: ReadonlyArray<Sample>,
  after: ReadonlyArray<Sample>,
  name: string,
  filter: Readonly<Record<string, string>>,
  qs: ReadonlyArray<number> = [0.5, 0.95, 0.99]
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
  const quantiles = qs.map((q) => {
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
