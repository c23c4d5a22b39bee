/** Just enough of the Prometheus text format to read counters back: the live tier's and the benchmarks'. */

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
