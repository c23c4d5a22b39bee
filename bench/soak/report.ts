/**
 * The soak's report: RSS fits, delete → free latency inside and outside fault windows, the tables
 * of faults, processes and violations, the plot and the rows for BENCHMARKS.md, written as the
 * run's report.md, report.json and plot.svg; with --publish (or --publish-as NAME) also
 * bench/results/soak.json (NAME.json: the benchmarks' result format, so BENCHMARKS.md's block of
 * that name is regenerated from it like the others), soak.svg and soak-report.md.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { linearFit } from "../lib/fit.ts"
import { ROOT } from "../lib/paths.ts"
import { gitState, machine, regenerate, type Row, row, table, writeResults, yesNo } from "../lib/report.ts"
import { sumWhere } from "../lib/scenarios.ts"
import { percentiles, type Percentiles } from "../lib/stats.ts"
import type { Violation } from "./checker.ts"
import { FAULT_KINDS } from "./fault-plan.ts"
import { type FaultRecord, SETTLE_MS } from "./faults.ts"
import { clock } from "./history.ts"
import type { Env, RunResult } from "./main.ts"
import type { Sample as FreeSample } from "./obligations.ts"
import { massEveryMs } from "./options.ts"
import { planSummary } from "./plan.ts"
import type { Workload } from "./workload.ts"
import { type Generation, IDENTITIES, type Sample as ProcSample } from "./replicas.ts"
import { type Panel, renderPlot, type Series } from "./svg.ts"

const COLORS: Record<string, string> = { "soak-a": "#1f77b4", "soak-b": "#ff7f0e" }

/** What a fit follows: RSS (from /proc), or V8's heap in use (from /metrics; undefined when a scrape failed). */
type Measure = (s: ProcSample) => number | undefined
const RSS: Measure = (s) => s.rssBytes
const HEAP: Measure = (s) => s.heapUsedBytes

/**
 * The least-squares slope shared by groups, each about its own means, in MiB/h, with its points and
 * the minutes they cover (all groups together); undefined below 3 points.
 */
const commonSlope = (groups: ReadonlyArray<ReadonlyArray<readonly [number, number]>>) => {
  const kept = groups.filter((pts) => pts.length >= 2)
  const centred = kept.flatMap((pts) => {
    const [mt, my] = [pts.reduce((a, [t]) => a + t, 0) / pts.length, pts.reduce((a, [, y]) => a + y, 0) / pts.length]
    return pts.map(([t, y]) => [t - mt, y - my] as const)
  })
  const fit = linearFit(centred)
  if (centred.length < 3 || fit === undefined) return undefined
  return { slope: (fit.slope * 3_600_000) / 2 ** 20, samples: centred.length, minutes: kept.reduce((a, pts) => a + pts.at(-1)![0] - pts[0]![0], 0) / 60_000 }
}

/** Each process of `identity`: its [time, value] samples at least `warmupMs` into its life. */
const afterWarmup = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identity: string, warmupMs: number, measure: Measure) =>
  generations
    .filter((x) => x.identity === identity)
    .map((g) =>
      samples.flatMap((s) => {
        const v = measure(s)
        return s.pid === g.pid && s.t - g.startedAt >= warmupMs && v !== undefined && Number.isFinite(v) ? [[s.t, v] as const] : []
      })
    )

/**
 * Least squares slope of RSS against time within each process (a common slope, each process its
 * own intercept: a restart's drop is no decrease), over samples at least `warmupMs` into its life.
 */
export const rssFit = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identity: string, warmupMs: number) =>
  commonSlope(afterWarmup(samples, generations, identity, warmupMs, RSS).filter((pts) => pts.length >= 3))

/**
 * The same fit over the floor: the lowest sample of each whole `windowMs` (the bursts' period) of
 * a process's life after warm-up, so it follows what stays after each burst rather than where in
 * the saw-tooth the run stopped. A process needs three whole windows to count; none: undefined.
 * Of RSS, the judged fit; of the heap in use, what each major collection kept: growth there is
 * a leak, growth in RSS alone is memory V8 or the allocator holds on to.
 */
export const floorFit = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identity: string, warmupMs: number, windowMs: number, measure: Measure = RSS) =>
  commonSlope(
    afterWarmup(samples, generations, identity, warmupMs, measure).map((pts) => {
      if (pts.length === 0) return []
      const from = pts[0]![0]
      const last = pts.at(-1)![0]
      const floors = new Map<number, readonly [number, number]>()
      for (const p of pts) {
        const w = Math.floor((p[0] - from) / windowMs)
        if (from + (w + 1) * windowMs > last) continue // the last, partial window
        const low = floors.get(w)
        if (low === undefined || p[1] < low[1]) floors.set(w, p)
      }
      return floors.size < 3 ? [] : [...floors.values()].sort((a, b) => a[0] - b[0])
    })
  )

const latencies = (samples: ReadonlyArray<FreeSample>, inWindow: (from: number, to: number) => boolean) => {
  const deleted = samples.filter((s) => s.why === "deleted")
  return {
    outside: percentiles(deleted.filter((s) => !inWindow(s.started, s.freedAt)).map((s) => s.latencyMs / 1000)),
    inside: percentiles(deleted.filter((s) => inWindow(s.started, s.freedAt)).map((s) => s.latencyMs / 1000)),
    neverRunsAgain: percentiles(samples.filter((s) => s.why !== "deleted").map((s) => s.latencyMs / 1000))
  }
}

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10
const f = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "–")
const pRow = (label: string, p: Percentiles) => [label, p.n, f(p.p50), f(p.p95), f(p.p99), f(p.max)]

/** At most `per` dots per `bucketMs` (the slowest first): the plot stays small, the outliers stay in it. */
const thin = (points: ReadonlyArray<readonly [number, number]>, bucketMs: number, per: number) =>
  [...Map.groupBy(points, (p) => Math.floor(p[0] / bucketMs)).values()].flatMap((l) => l.sort((a, b) => b[1] - a[1]).slice(0, per))

interface RunFacts {
  readonly title: string
  readonly t0: number
  readonly durationMs: number
  readonly faults: ReadonlyArray<FaultRecord>
  readonly windows: ReadonlyArray<readonly [number, number]>
  readonly samples: ReadonlyArray<ProcSample>
  readonly generations: ReadonlyArray<Generation>
  readonly frees: ReadonlyArray<FreeSample>
}

const plotOf = (r: RunFacts): string => {
  const rel = (t: number) => t - r.t0
  const perProcess = (value: (s: ProcSample) => number | undefined): ReadonlyArray<Series> =>
    r.generations.map((g) => ({
      label: g.identity,
      color: COLORS[g.identity] ?? "#444",
      points: r.samples.filter((s) => s.pid === g.pid).flatMap((s) => {
        const v = value(s)
        return v === undefined || !Number.isFinite(v) ? [] : [[rel(s.t), v] as const]
      })
    }))
  const dots = (why: (s: FreeSample) => boolean) => thin(r.frees.filter(why).map((s) => [rel(s.freedAt), Math.max(s.latencyMs / 1000, 0.01)] as const), Math.max(5_000, r.durationMs / 600), 3)
  const panels: ReadonlyArray<Panel> = [
    { title: "RSS per replica", unit: "MiB", lines: perProcess((s) => s.rssBytes / 2 ** 20) },
    { title: "V8 heap in use per replica", unit: "MiB", lines: perProcess((s) => (s.heapUsedBytes === undefined ? undefined : s.heapUsedBytes / 2 ** 20)) },
    { title: "work queue depth + in flight (leader)", unit: "pods", lines: perProcess((s) => (s.leader === 1 ? (s.queueDepth ?? 0) + (s.inFlight ?? 0) : undefined)) },
    {
      title: "delete → free latency",
      unit: "s, log scale",
      log: true,
      dots: [
        { label: "deleted pods", color: "#2ca02c", points: dots((s) => s.why === "deleted") },
        { label: "never run again", color: "#9467bd", points: dots((s) => s.why !== "deleted") }
      ]
    }
  ]
  return renderPlot({ durationMs: r.durationMs, windows: r.windows, panels, title: r.title })
}

const faultTable = (r: RunFacts): string =>
  table(
    ["#", "start", "fault", "recovered after", "notes"],
    r.faults.map((x, i) => [
      i + 1,
      clock(x.start - r.t0),
      x.description,
      x.recoveredAt === undefined ? "–" : `${((x.recoveredAt - x.start) / 1000).toFixed(1)} s`,
      x.notes.join("; ").replaceAll("|", "/")
    ])
  )

type Latencies = ReturnType<typeof latencies>

const latencyTable = (l: Latencies): string =>
  table(["delete → free (s)", "n", "p50", "p95", "p99", "max"], [pRow("deleted, outside fault windows", l.outside), pRow("deleted, inside fault windows", l.inside), pRow("never run again (finished, evicted, dead node), from the moment it qualified", l.neverRunsAgain)])

const generationTable = (r: RunFacts): string =>
  table(
    ["replica", "process", "started", "ended", "how"],
    r.generations.map((g) => [
      g.identity,
      `#${g.n} (pid ${g.pid})`,
      clock(g.startedAt - r.t0),
      g.exitedAt === undefined ? "running" : clock(g.exitedAt - r.t0),
      g.exit === undefined ? "–" : `${g.endedBy ?? "NOT BY THE HARNESS"}: ${g.exit.signal ?? `exit code ${g.exit.code}`}`
    ])
  )

const violationBlocks = (vs: ReadonlyArray<Violation>): string =>
  vs.length === 0
    ? "None."
    : vs
        .map((v, i) =>
          [
            `### ${i + 1}. ${v.kind} at ${clock(v.t)}`,
            "",
            v.summary,
            "",
            "History of the objects involved (the checker's watches, the kubelet's steps, faults, leadership):",
            "",
            "```",
            ...v.history,
            "```",
            ...(v.controllerLog.length === 0 ? [] : ["", "Controller log lines naming the pod:", "", "```", ...v.controllerLog, "```"])
          ].join("\n")
        )
        .join("\n\n")

/** Violations as BENCHMARKS.md lists them: one line each (the first ten), the histories in the run's full report. */
const violationList = (vs: ReadonlyArray<Pick<Violation, "kind" | "summary">>, fullReport: string): string =>
  vs.length === 0
    ? "None."
    : [
        table(["#", "kind", "what"], vs.slice(0, 10).map((v, i) => [String(i + 1), v.kind, v.summary])),
        ...(vs.length > 10 ? [`… and ${vs.length - 10} more.`] : []),
        `Each with the history of the objects involved: ${fullReport}.`
      ].join("\n\n")

/**
 * Each identity's fits: RSS over every sample after warm-up, RSS's floor (judged on; its window
 * `windowMs`, the mass deletions' period) and the floor of the heap in use.
 */
const rssFits = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identities: ReadonlyArray<string>, warmupMs: number, windowMs: number) =>
  identities.map(
    (id) =>
      [
        id,
        {
          all: rssFit(samples, generations, id, warmupMs),
          floor: floorFit(samples, generations, id, warmupMs, windowMs),
          heapFloor: floorFit(samples, generations, id, warmupMs, windowMs, HEAP),
          windowMs
        }
      ] as const
  )

/** Floors spanning less than this (all processes together) say too little about an hourly rate to judge the target on. */
const MIN_FLOOR_MINUTES = 30

/**
 * Rows for BENCHMARKS.md: the issue's targets and what this run measured; per replica the RSS
 * floor's fit (judged, given MIN_FLOOR_MINUTES of it) and the fit over every sample.
 */
const targetRows = (scenario: string, violations: number, l: Latencies, fits: ReturnType<typeof rssFits>): ReadonlyArray<Row> => [
  row(scenario, "invariant violations", { ours: String(violations), baseline: "–", target: "0", met: yesNo(violations === 0) }),
  row(scenario, `p99 delete → free outside fault windows (n = ${l.outside.n})`, { ours: `${f(l.outside.p99)} s`, baseline: "–", target: "≤ 2 s", met: yesNo(l.outside.n === 0 ? undefined : l.outside.p99 <= 2) }),
  row(scenario, `p99 delete → free inside fault windows (n = ${l.inside.n})`, { ours: `${f(l.inside.p99)} s`, baseline: "–" }),
  ...fits.map(([who, { all, floor, windowMs }]) =>
    row(scenario, `RSS growth after warm-up, ${who}: the floor (lowest of each ${f(windowMs / 60_000, 0)} min${floor === undefined ? "" : `, ${floor.samples} points over ${f(floor.minutes, 0)} min`}) / every sample${all === undefined ? "" : ` (${all.samples} samples, ${f(all.minutes, 0)} min)`}`, {
      ours: `${floor === undefined ? "–" : `${f(floor.slope, 1)} MiB/h`} / ${all === undefined ? "–" : `${f(all.slope, 1)} MiB/h`}`,
      baseline: "–",
      target: "≤ 5 MiB/h (the floor)",
      met: yesNo(floor === undefined || floor.minutes < MIN_FLOOR_MINUTES ? undefined : floor.slope <= 5)
    })
  ),
  ...fits.map(([who, { heapFloor, windowMs }]) =>
    row(scenario, `V8 heap in use after warm-up, ${who}: the floor (lowest of each ${f(windowMs / 60_000, 0)} min${heapFloor === undefined ? "" : `, ${heapFloor.samples} points over ${f(heapFloor.minutes, 0)} min`}): growth here is a leak`, {
      ours: heapFloor === undefined ? "–" : `${f(heapFloor.slope, 1)} MiB/h`,
      baseline: "–"
    })
  )
]

const publishFlag = (as: Env["o"]["publishAs"]) => (as === undefined ? "" : as === "soak" ? " --publish" : ` --publish-as ${as}`)

const commandOf = (o: Env["o"]) =>
  `npm run soak -- --minutes ${o.minutes} --seed ${o.seed} --rate ${o.rate} --fault-every ${o.faultEverySeconds}${o.faults.length < FAULT_KINDS.length ? ` --faults ${o.faults.join(",")}` : ""}${publishFlag(o.publishAs)}`

/** The summary's scenario: the length, and which faults were left out when some were. */
const scenarioOf = (o: Env["o"]) => {
  const left = FAULT_KINDS.filter((k) => !o.faults.includes(k))
  return `soak, ${o.minutes} min${left.length === 0 ? "" : `, without ${left.join(", ")}`}`
}

export const workloadFacts = (workload: Workload, t0: number) => {
  const recs = [...workload.records.values()]
  const starts = percentiles(recs.flatMap((x) => (x.createdAt !== undefined && x.runningAt !== undefined ? [(x.runningAt - x.createdAt) / 1000] : [])))
  const lateness = percentiles(recs.flatMap((x) => (x.createdAt === undefined ? [] : [(x.createdAt - (t0 + x.plan.at)) / 1000])))
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
    cniDel: workload.delStarted.size,
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
  const fits = rssFits(facts.samples, facts.generations, IDENTITIES, o.warmupSeconds * 1000, massEveryMs(o))
  const rows = targetRows(scenarioOf(o), checker.violations.length, l, fits)
  const w = workloadFacts(r.workload, r.t0)
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
    // Every sample, for another look at the fits: per process, [ms since t0, RSS MiB, heap in use MiB (null: no scrape)].
    rssSamples: facts.generations.map((g) => ({
      identity: g.identity,
      pid: g.pid,
      startedAt: g.startedAt - r.t0,
      points: facts.samples.filter((x) => x.pid === g.pid).map((x) => [x.t - r.t0, mib(x.rssBytes), x.heapUsedBytes === undefined ? null : mib(x.heapUsedBytes)])
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
  const as = o.publishAs
  if (as !== undefined) {
    // BENCHMARKS.md's section: the body without the targets table (the rows are the results'), violations listed one line each.
    fs.writeFileSync(path.join(ROOT, `bench/results/${as}.svg`), svg)
    const violations = `**Violations** (${checker.violations.length}):\n\n${violationList(checker.violations, `\`bench/results/${as}-report.md\``)}`
    writeResults({
      name: as,
      command: commandOf(o),
      date: new Date(r.t0).toISOString(),
      durationSeconds: r.cpu.wallSeconds,
      machine: machine(),
      rows,
      sections: [{ title: `Soak run (seed ${o.seed}${as === "soak" ? "" : `, ${as}`})`, body: `${[body[0], ...body.slice(2, -1), violations].join("\n\n")}\n\n![soak plot](bench/results/${as}.svg)` }],
      data: { ...data, frees: undefined, violations: checker.violations.map((v) => ({ at: clock(v.t), kind: v.kind, summary: v.summary })) }
    })
    regenerate([as])
    fs.writeFileSync(path.join(ROOT, `bench/results/${as}-report.md`), report(`${as}.svg`))
  }
  return path.join(o.out, "report.md")
}
