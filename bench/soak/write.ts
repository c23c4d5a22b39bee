/**
 * Writes a run's report.md, report.json and plot.svg to its output directory; with --publish (or
 * --publish-as NAME) also bench/results/soak.json (NAME.json: the benchmarks' result format, so
 * BENCHMARKS.md's block of that name is regenerated from it like the others), soak.svg and
 * soak-report.md.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ROOT } from "../lib/paths.ts"
import { gitState, machine, regenerate, type Results, table, writeResults } from "../lib/report.ts"
import { sumWhere } from "../lib/scenarios.ts"
import { percentiles } from "../lib/stats.ts"
import { clock } from "./history.ts"
import { FAULT_KINDS } from "./fault-plan.ts"
import { SETTLE_MS } from "./faults.ts"
import { massEveryMs, type PublishedAs } from "./options.ts"
import type { Env, RunResult } from "./main.ts"
import { planSummary } from "./plan.ts"
import { IDENTITIES } from "./replicas.ts"
import { faultTable, generationTable, latencies, latencyTable, plotOf, type RunFacts, rssFits, targetRows, violationBlocks, violationList } from "./report.ts"

const publishFlag = (as: Env["o"]["publishAs"]) => (as === undefined ? "" : as === "soak" ? " --publish" : ` --publish-as ${as}`)

const commandOf = (o: Env["o"]) =>
  `npm run soak -- --minutes ${o.minutes} --seed ${o.seed} --rate ${o.rate} --fault-every ${o.faultEverySeconds}${o.faults.length < FAULT_KINDS.length ? ` --faults ${o.faults.join(",")}` : ""}${publishFlag(o.publishAs)}`

/** The summary's scenario: the length, and which faults were left out when some were. */
const scenarioOf = (o: Env["o"]) => {
  const left = FAULT_KINDS.filter((k) => !o.faults.includes(k))
  return `soak, ${o.minutes} min${left.length === 0 ? "" : `, without ${left.join(", ")}`}`
}

const workloadFacts = (r: RunResult) => {
  const recs = [...r.workload.records.values()]
  const starts = percentiles(recs.flatMap((x) => (x.createdAt !== undefined && x.runningAt !== undefined ? [(x.runningAt - x.createdAt) / 1000] : [])))
  const lateness = percentiles(recs.flatMap((x) => (x.createdAt === undefined ? [] : [(x.createdAt - (r.t0 + x.plan.at)) / 1000])))
  return {
    /** Seconds from the pod's creation to Running (the plugin's ADDs, the status writes). */
    startSeconds: { p50: starts.p50, p99: starts.p99, max: starts.max },
    /** Seconds the creation came after its planned time (the harness keeping up, or not). */
    createLateSeconds: { p50: lateness.p50, p99: lateness.p99, max: lateness.max },
    planned: recs.length,
    created: recs.filter((x) => x.uid !== undefined).length,
    started: recs.filter((x) => x.containerId !== undefined).length,
    neverStarted: recs.filter((x) => x.state === "never-started" && x.plan.kind !== "bad").length,
    runningAtEnd: recs.filter((x) => x.state === "running").length,
    sandboxRetries: recs.reduce((a, x) => a + x.addFailures, 0),
    cniDel: r.workload.delStarted.size,
    gone: recs.filter((x) => x.state === "gone").length
  }
}

/** Watches refused 410, requests answered 429 and 5xx, and those that got no answer, from the controllers' counters. */
const requestSummary = (counts: Readonly<Record<string, number>>): string =>
  [
    `${sumWhere(counts, () => true)} requests`,
    `${sumWhere(counts, ([v, c]) => v === "watch" && c === "410")} watches answered 410`,
    `${sumWhere(counts, ([, c]) => c === "429")} answered 429`,
    `${sumWhere(counts, ([, c]) => /^5\d\d$/.test(c!))} answered 5xx`,
    `${sumWhere(counts, ([, c]) => !/^\d+$/.test(c!))} without an answer`
  ].join(", ")

export const writeReport = (env: Env, r: RunResult): string => {
  const { o, checker, replicas, faults } = env
  const facts: RunFacts = {
    title: `soak: seed ${o.seed}, ${o.minutes} min, ${o.rate} pods/s, a fault every ${o.faultEverySeconds} s`,
    t0: r.t0,
    durationMs: Math.max(r.durationMs, Date.now() - r.t0),
    faults: faults.records(),
    windows: faults.windows().map((w) => [w.start - r.t0, (w.end ?? Date.now() + SETTLE_MS) - r.t0] as const),
    samples: replicas.samples(),
    generations: replicas.generations(),
    frees: checker.obligations.samples()
  }
  const l = latencies(facts.frees, faults.inWindow)
  // The floor's window: the mass deletions' period, the burst the RSS saw-tooths with.
  const fits = rssFits(facts.samples, facts.generations, IDENTITIES, o.warmupSeconds * 1000, massEveryMs(o))
  const rows = targetRows(scenarioOf(o), checker.violations.length, l, fits)
  const w = workloadFacts(r)
  const proxy = env.proxy.stats()
  const leaderChanges = checker.leaseHolders.filter((x) => x.holder !== "").length
  const svg = plotOf(facts)
  const body = [
    `Seed ${o.seed}; \`${commandOf(o)}\`; ${new Date(r.t0).toISOString()}; ${gitState()} ${os.cpus().length} CPUs, load average ${os.loadavg()[0]!.toFixed(1)} at the end.`,
    table(["target", "measured", "target", "met"], rows.map((x) => [x.metric, x.ours, x.target, x.met])),
    `**Workload.** ${w.planned} pods planned (${JSON.stringify(planSummary(r.plan).byEnd)}), ${w.created} created, ${w.started} started by the real plugin (creation to Running p50 ${w.startSeconds.p50.toFixed(1)} s, p99 ${w.startSeconds.p99.toFixed(1)} s; creations p99 ${w.createLateSeconds.p99.toFixed(1)} s after their planned time; ${w.sandboxRetries} sandbox retries; ${w.neverStarted} never got their addresses), ${w.gone} gone, ${w.runningAtEnd} running at the end; CNI DEL played for ${w.cniDel}. The check at rest read ${r.atRest.livePods} running pods, ${r.atRest.entries} pool entries and ${r.atRest.reservations} reservations. kube-apiserver used ${r.cpu.apiserver.toFixed(0)} CPU s and etcd ${r.cpu.etcd.toFixed(0)} over ${r.cpu.wallSeconds.toFixed(0)} s.`,
    `**Faults** (${facts.faults.length}; a window lasts until a replica leads again, plus 5 s):\n\n${faultTable(facts)}`,
    `**Delete → free latency** (the checker's watches: the pod's final delete, or the moment it qualified as never running again, to the last of its entries and reservations gone; addresses a reborn namesake took over, and pods whose CNI DEL freed everything, are not counted):\n\n${latencyTable(l)}`,
    `**Controller processes** (${leaderChanges} times the Lease got a holder):\n\n${generationTable(facts)}`,
    `**Through the proxy**: ${Object.entries(proxy.forwarded).map(([k, v]) => `${v} × ${k}`).join(", ")}; ${proxy.throttled} answered 429 by the proxy; ${proxy.resets} connections reset. The controllers' own count (\`api_requests_total\`, every process's last scrape): ${requestSummary(replicas.requests())}.`,
    `**Events seen**: ${[...checker.eventReasons].map(([k, v]) => `${v} × ${k}`).join(", ") || "none"}.`,
    `**Violations** (${checker.violations.length}):\n\n${violationBlocks(checker.violations)}`
  ]
  const as = o.publishAs
  const published = [...body.slice(0, -1), `**Violations** (${checker.violations.length}):\n\n${violationList(checker.violations, `\`bench/results/${as ?? "soak"}-report.md\``)}`]
  fs.writeFileSync(path.join(o.out, "plot.svg"), svg)
  const report = (plot: string) => `# Soak, seed ${o.seed}\n\n${body.join("\n\n")}\n\n![plot](${plot})\n`
  fs.writeFileSync(path.join(o.out, "report.md"), report("plot.svg"))
  const data = {
    options: o,
    plan: planSummary(r.plan),
    workload: w,
    faults: facts.faults.map((x) => ({ at: clock(x.start - r.t0), kind: x.planned.spec.kind, spec: x.planned.spec, recoveredAfterSeconds: x.recoveredAt === undefined ? null : (x.recoveredAt - x.start) / 1000, notes: x.notes })),
    violations: checker.violations,
    latencies: l,
    rssFits: Object.fromEntries(fits),
    // Every RSS sample, for another look at the fits: per process, [ms since t0, MiB] pairs.
    rssSamples: facts.generations.map((g) => ({
      identity: g.identity,
      pid: g.pid,
      startedAt: g.startedAt - r.t0,
      points: facts.samples.filter((x) => x.pid === g.pid).map((x) => [x.t - r.t0, Math.round((x.rssBytes / 2 ** 20) * 10) / 10])
    })),
    generations: facts.generations,
    leaseHolders: checker.leaseHolders.map((x) => ({ at: clock(x.t - r.t0), holder: x.holder })),
    warnings: checker.warnings.map((x) => ({ at: clock(x.t - r.t0), text: x.text })),
    proxy,
    controllerRequests: replicas.requests(),
    cpu: r.cpu,
    atRest: r.atRest,
    /** Every free seen: [ms after the start it began, latency ms, why, pod, inside a fault window]. */
    frees: facts.frees.map((x) => [x.started - r.t0, x.latencyMs, x.why, x.ref, faults.inWindow(x.started, x.freedAt)])
  }
  fs.writeFileSync(path.join(o.out, "report.json"), `${JSON.stringify(data, null, 2)}\n`)
  if (as !== undefined) {
    publish(as, o, r, rows, published, svg, data)
    fs.writeFileSync(path.join(ROOT, `bench/results/${as}-report.md`), report(`${as}.svg`))
  }
  return path.join(o.out, "report.md")
}

const publish = (as: PublishedAs, o: Env["o"], r: RunResult, rows: Results["rows"], body: ReadonlyArray<string>, svg: string, data: Record<string, unknown>) => {
  fs.writeFileSync(path.join(ROOT, `bench/results/${as}.svg`), svg)
  const results: Results = {
    name: as,
    command: commandOf(o),
    date: new Date(r.t0).toISOString(),
    durationSeconds: r.cpu.wallSeconds,
    machine: machine(),
    rows,
    sections: [{ title: `Soak run (seed ${o.seed}${as === "soak" ? "" : `, ${as}`})`, body: `${[body[0], ...body.slice(2)].join("\n\n")}\n\n![soak plot](bench/results/${as}.svg)` }],
    data: { ...data, frees: undefined, violations: (data["violations"] as ReadonlyArray<{ t: number; kind: string; summary: string }>).map((v) => ({ at: clock(v.t), kind: v.kind, summary: v.summary })) }
  }
  writeResults(results)
  regenerate([as])
}
