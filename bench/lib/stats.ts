/** Percentiles and summaries of samples; nearest-rank percentiles, as most latency tools report them. */

export interface Percentiles {
  readonly n: number
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly min: number
  readonly max: number
  readonly mean: number
}

/** Nearest-rank percentile of sorted samples (q in [0, 1]). */
export const percentile = (sorted: ReadonlyArray<number>, q: number): number => {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.max(1, Math.ceil(q * sorted.length))
  return sorted[Math.min(sorted.length, rank) - 1]!
}

export const percentiles = (samples: ReadonlyArray<number>): Percentiles => {
  const sorted = [...samples].sort((a, b) => a - b)
  const sum = sorted.reduce((a, b) => a + b, 0)
  return {
    n: sorted.length,
    p50: percentile(sorted, 0.5),
    p95: percentile(sorted, 0.95),
    p99: percentile(sorted, 0.99),
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length
  }
}

/** min / median / max over repetitions (each repetition one value). */
export const spread = (runs: ReadonlyArray<number>) => {
  const sorted = [...runs].sort((a, b) => a - b)
  const mid = sorted.length === 0 ? Number.NaN : sorted.length % 2 === 1 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2
  return { min: sorted[0] ?? Number.NaN, median: mid, max: sorted[sorted.length - 1] ?? Number.NaN }
}

/** A readable number: 3 significant digits, thousands separated. */
export const fmt = (n: number | undefined, digits = 3): string => {
  if (n === undefined || Number.isNaN(n)) return "–"
  if (!Number.isFinite(n)) return String(n)
  if (n === 0) return "0"
  const abs = Math.abs(n)
  if (abs >= 10 ** digits) return Math.round(n).toLocaleString("en-US")
  return Number(n.toPrecision(digits)).toLocaleString("en-US", { maximumFractionDigits: 6 })
}

/** Bytes in MiB, readable. */
export const mib = (b: number): string => `${fmt(b / 2 ** 20)} MiB`

export const ms = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? "–" : n >= 10_000 ? `${fmt(n / 1000)} s` : `${fmt(n)} ms`)
