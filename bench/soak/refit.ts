/**
 * `node bench/soak/refit.ts`: the RSS fits of the published soak (bench/results/soak.json) computed
 * again from the samples it keeps, with the fit code as it is now; its rows, its section's table
 * and BENCHMARKS.md follow. For a change to how growth is judged, without an hour's rerun.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { ROOT } from "../lib/paths.ts"
import { regenerate } from "../lib/report.ts"
import { readResults, writeResults } from "../lib/results.ts"
import { massEveryMs } from "./options.ts"
import type { Generation, Sample } from "./replicas.ts"
import { type RssFits, rssFit, rssFloorFit, rssRows } from "./report.ts"

interface Kept {
  readonly identity: string
  readonly pid: number
  readonly startedAt: number
  readonly points: ReadonlyArray<readonly [number, number]>
}

const results = readResults("soak")
const data = results?.data as { options: { minutes: number; warmupSeconds: number }; rssSamples?: ReadonlyArray<Kept> } | undefined
if (results === undefined || data?.rssSamples === undefined) {
  process.stderr.write("bench/results/soak.json has no RSS samples (a run before they were kept): nothing to fit again\n")
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
const fits = identities.map((id) => [id, { all: rssFit(samples, generations, id, warmupMs), floor: rssFloorFit(samples, generations, id, warmupMs, windowMs), windowMs } satisfies RssFits] as const)
const scenario = results.rows[0]?.scenario ?? "soak"
const fresh = rssRows(scenario, fits)
const rows = [...results.rows.filter((r) => !r.metric.startsWith("RSS growth")), ...fresh]
// The section's own table: its RSS lines replaced by the new ones (columns: metric, measured, target, met).
const body = results.sections.map((s) => {
  const lines = s.body.split("\n")
  const at = lines.findIndex((l) => l.startsWith("| RSS growth"))
  if (at < 0) return s
  const rest = lines.filter((l) => !l.startsWith("| RSS growth"))
  rest.splice(at, 0, ...fresh.map((r) => `| ${r.metric} | ${r.ours} | ${r.target} | ${r.met} |`))
  return { ...s, body: rest.join("\n") }
})
writeResults({ ...results, rows, sections: body, data: { ...data, rssFits: Object.fromEntries(fits) } })
// The full report's table too.
const full = path.join(ROOT, "bench/results/soak-report.md")
if (fs.existsSync(full)) {
  const lines = fs.readFileSync(full, "utf8").split("\n")
  const at = lines.findIndex((l) => l.startsWith("| RSS growth"))
  if (at >= 0) {
    const rest = lines.filter((l) => !l.startsWith("| RSS growth"))
    rest.splice(at, 0, ...fresh.map((r) => `| ${r.metric} | ${r.ours} | ${r.target} | ${r.met} |`))
    fs.writeFileSync(full, rest.join("\n"))
  }
}
regenerate()
for (const r of fresh) process.stdout.write(`${r.metric}: ${r.ours} (${r.met})\n`)
