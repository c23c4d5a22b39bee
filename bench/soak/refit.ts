/**
 * `node bench/soak/refit.ts [NAME]`: the RSS fits of a published soak (bench/results/NAME.json,
 * soak by default, or soak-steady) computed again from the samples it keeps, with the fit code as
 * it is now; its rows, its section's table and BENCHMARKS.md follow. For a change to how growth
 * is judged, without an hour's rerun.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { ROOT } from "../lib/paths.ts"
import { regenerate } from "../lib/report.ts"
import { readResults, writeResults } from "../lib/results.ts"
import { isPublishedAs, massEveryMs, PUBLISHED_AS } from "./options.ts"
import type { Generation, Sample } from "./replicas.ts"
import { rssFits, rssRows } from "./report.ts"

interface Kept {
  readonly identity: string
  readonly pid: number
  readonly startedAt: number
  readonly points: ReadonlyArray<readonly [number, number]>
}

const name = process.argv[2] ?? "soak"
if (!isPublishedAs(name)) {
  process.stderr.write(`${name}: not a published soak (${PUBLISHED_AS.join(", ")})\n`)
  process.exit(2)
}
const results = readResults(name)
const data = results?.data as { options: { minutes: number; warmupSeconds: number }; rssSamples?: ReadonlyArray<Kept> } | undefined
if (results === undefined || data?.rssSamples === undefined) {
  process.stderr.write(`bench/results/${name}.json is missing or has no RSS samples (a run before they were kept): nothing to fit again\n`)
  process.exit(1)
}
const kept = data.rssSamples
const generations: Array<Generation> = kept.map((k, n) => ({ identity: k.identity, n, pid: k.pid, startedAt: k.startedAt, exitedAt: undefined, exit: undefined, endedBy: undefined }))
const samples: Array<Sample> = kept.flatMap((k) =>
  k.points.map(([t, mib]) => ({ t, identity: k.identity, pid: k.pid, rssBytes: mib * 2 ** 20, heapUsedBytes: undefined, leader: undefined, queueDepth: undefined, inFlight: undefined }))
)
const warmupMs = data.options.warmupSeconds * 1000
const windowMs = massEveryMs(data.options)
const identities = [...new Set(kept.map((k) => k.identity))].sort()
const fits = rssFits(samples, generations, identities, warmupMs, windowMs)
const scenario = results.rows[0]?.scenario ?? "soak"
const fresh = rssRows(scenario, fits)
const rows = [...results.rows.filter((r) => !r.metric.startsWith("RSS growth")), ...fresh]
/** A report's targets table (columns: metric, measured, target, met) with its RSS lines replaced by the new ones. */
const withFreshRss = (text: string): string => {
  const lines = text.split("\n")
  const at = lines.findIndex((l) => l.startsWith("| RSS growth"))
  if (at < 0) return text
  const rest = lines.filter((l) => !l.startsWith("| RSS growth"))
  rest.splice(at, 0, ...fresh.map((r) => `| ${r.metric} | ${r.ours} | ${r.target} | ${r.met} |`))
  return rest.join("\n")
}
const sections = results.sections.map((s) => ({ ...s, body: withFreshRss(s.body) }))
writeResults({ ...results, rows, sections, data: { ...data, rssFits: Object.fromEntries(fits) } })
const full = path.join(ROOT, `bench/results/${name}-report.md`)
if (fs.existsSync(full)) fs.writeFileSync(full, withFreshRss(fs.readFileSync(full, "utf8")))
regenerate()
for (const r of fresh) process.stdout.write(`${r.metric}: ${r.ours} (${r.met})\n`)
