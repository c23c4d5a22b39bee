/**
 * What a PromQL expression (an alert's, a dashboard panel's) refers to: the metric names it
 * selects, the labels it matches on per metric, and the labels it groups or joins by; and what a
 * Prometheus text exposition offers (series names and their label names). Enough for the
 * queries this repository writes, not a PromQL parser: it refuses what it cannot read.
 */

export interface Selector {
  readonly metric: string
  /** Label names in the selector's matchers. */
  readonly labels: ReadonlyArray<string>
}

export interface QueryRefs {
  readonly selectors: ReadonlyArray<Selector>
  /** Label names in by/without/on/ignoring/group_left/group_right clauses. */
  readonly grouping: ReadonlyArray<string>
}

const KEYWORDS = new Set(["and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan", "atan2"])
const IDENT = String.raw`[a-zA-Z_:][a-zA-Z0-9_:]*`

/** Metric names, matcher labels and grouping labels of `expr` (Grafana's `$variables` allowed). */
export const queryRefs = (expr: string): QueryRefs => {
  // Grafana variables: in a range they stand for a duration, in a string for a value.
  let text = expr.replace(/\$\{?__\w+\}?|\$\{\w+\}|\$\w+/g, "5m")
  text = text.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
  text = text.replace(/\[[^\]]*\]/g, " ")
  const selectors: Array<Selector> = []
  text = text.replace(new RegExp(String.raw`(${IDENT})?\s*\{([^}]*)\}`, "g"), (_, metric: string | undefined, body: string) => {
    const labels = [...body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)].map((m) => m[1]!)
    if (metric === undefined || KEYWORDS.has(metric)) throw new Error(`a selector without a metric name in ${JSON.stringify(expr)}`)
    selectors.push({ metric, labels })
    return " "
  })
  const grouping: Array<string> = []
  text = text.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_, _kw: string, labels: string) => {
    grouping.push(...labels.split(",").map((l) => l.trim()).filter((l) => l !== ""))
    return " "
  })
  for (const m of text.matchAll(new RegExp(String.raw`\b(${IDENT})\b(\s*\()?`, "g"))) {
    const [, name, call] = m
    if (call !== undefined || KEYWORDS.has(name!) || /^\d/.test(name!)) continue
    selectors.push({ metric: name!, labels: [] })
  }
  return { selectors, grouping }
}

/** Series name → the label names it carries, from a Prometheus text exposition. */
export const exposedSeries = (exposition: string): ReadonlyMap<string, ReadonlySet<string>> => {
  const series = new Map<string, Set<string>>()
  for (const line of exposition.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const m = new RegExp(String.raw`^(${IDENT})(?:\{(.*)\})?\s`).exec(line)
    if (m === null) throw new Error(`unreadable exposition line: ${line}`)
    const labels = series.get(m[1]!) ?? new Set<string>()
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) labels.add(l[1]!)
    series.set(m[1]!, labels)
  }
  return series
}

/**
 * Labels Prometheus puts on every scraped series (the Prometheus Operator's ServiceMonitor adds
 * the Kubernetes ones): a query may match or group by them whatever the controller exports.
 */
export const TARGET_LABELS: ReadonlySet<string> = new Set(["job", "instance", "namespace", "pod", "service", "endpoint", "container"])

/** What `expr` refers to that `series` lacks, one line each; empty when everything exists. */
export const missingRefs = (expr: string, series: ReadonlyMap<string, ReadonlySet<string>>): Array<string> => {
  const refs = queryRefs(expr)
  const problems: Array<string> = []
  const known = new Set<string>(TARGET_LABELS)
  for (const s of refs.selectors) {
    const labels = series.get(s.metric)
    if (labels === undefined) {
      problems.push(`metric ${s.metric} is not exported`)
      continue
    }
    for (const l of labels) known.add(l)
    for (const l of s.labels) if (!labels.has(l) && !TARGET_LABELS.has(l)) problems.push(`${s.metric} has no label ${l}`)
  }
  for (const l of refs.grouping) if (!known.has(l)) problems.push(`no metric of the query has the label ${l} it groups or joins by`)
  return problems
}
