/**
 * Just enough of the Prometheus text format to read metrics back as a scrape does: the in-process
 * controller's (tests, the demo), the live tier's and the benchmarks'.
 */
import { Effect } from "effect"
import { Metrics, type MetricsShape } from "../services/Metrics.ts"

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

/** Whether a sample's labels include every one of `labels`. */
const carrying = (labels: Readonly<Record<string, string>>) => (l: Readonly<Record<string, string>>) => Object.entries(labels).every(([k, v]) => l[k] === v)

/** Sum of the samples named `name` whose labels match `filter` (a predicate or exact values). */
export const sum = (samples: ReadonlyArray<Sample>, name: string, filter: Readonly<Record<string, string>> | ((l: Readonly<Record<string, string>>) => boolean) = {}): number => {
  const ok = typeof filter === "function" ? filter : carrying(filter)
  return samples.filter((s) => s.name === name && ok(s.labels)).reduce((a, s) => a + s.value, 0)
}

/** The value of our metric `name` (no prefix; a histogram's `_count`, `_sum`, `_bucket` too) in the first series carrying `labels`, from `metrics`' exposition; undefined before there is one. */
export const valueIn = (metrics: MetricsShape, name: string, labels: Readonly<Record<string, string>> = {}) =>
  Effect.map(metrics.render, ({ body }) => parseProm(body, (n) => n === `whereabouts_controller_${name}`).find((s) => carrying(labels)(s.labels))?.value)

/** `valueIn` the Metrics in context. */
export const metric = (name: string, labels: Readonly<Record<string, string>> = {}) => Effect.flatMap(Metrics, (m) => valueIn(m, name, labels))
