/**
 * The soak report's parts: RSS fits, delete → free latency inside and outside fault windows, the
 * tables of faults, processes and violations, the plot, and the rows for BENCHMARKS.md.
 */
import { linearFit } from "../lib/fit.ts"
import { percentiles, type Percentiles } from "../lib/stats.ts"
import { type Row, row, table, yesNo } from "../lib/report.ts"
import { clock } from "./history.ts"
import type { Violation } from "./checker.ts"
import type { FaultRecord } from "./faults.ts"
import type { Sample as FreeSample } from "./obligations.ts"
import type { Generation, Sample as ProcSample } from "./replicas.ts"
import { type Panel, renderPlot, type Series } from "./svg.ts"

const COLORS: Record<string, string> = { "soak-a": "#1f77b4", "soak-b": "#ff7f0e" }

export interface Fit {
  /** MiB per hour */
  readonly slope: number
  readonly samples: number
  /** Minutes of samples the fit covers (all processes together). */
  readonly minutes: number
}

/** The least-squares slope shared by groups, each about its own means, in MiB/h; undefined below 3 points. */
const commonSlope = (groups: ReadonlyArray<ReadonlyArray<ProcSample>>): Fit | undefined => {
  const kept = groups.filter((pts) => pts.length >= 2)
  const centred = kept.flatMap((pts) => {
    const [mt, my] = [pts.reduce((a, s) => a + s.t, 0) / pts.length, pts.reduce((a, s) => a + s.rssBytes, 0) / pts.length]
    return pts.map((s) => [s.t - mt, s.rssBytes - my] as const)
  })
  const fit = linearFit(centred)
  if (centred.length < 3 || fit === undefined) return undefined
  return { slope: (fit.slope * 3_600_000) / 2 ** 20, samples: centred.length, minutes: kept.reduce((a, pts) => a + pts.at(-1)!.t - pts[0]!.t, 0) / 60_000 }
}

/** Each process of `identity`: its samples at least `warmupMs` into its life. */
const afterWarmup = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identity: string, warmupMs: number) =>
  generations
    .filter((x) => x.identity === identity)
    .map((g) => samples.filter((s) => s.pid === g.pid && s.t - g.startedAt >= warmupMs && Number.isFinite(s.rssBytes)))

/**
 * Least squares slope of RSS against time within each process (a common slope, each process its
 * own intercept: a restart's drop is no decrease), over samples at least `warmupMs` into its life.
 */
export const rssFit = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identity: string, warmupMs: number): Fit | undefined =>
  commonSlope(afterWarmup(samples, generations, identity, warmupMs).filter((pts) => pts.length >= 3))

/**
 * The same fit over the floor: the lowest sample of each whole `windowMs` (the bursts' period) of
 * a process's life after warm-up, so it follows what stays after each burst rather than where in
 * the saw-tooth the run stopped. A process needs three whole windows to count; none: undefined.
 */
export const rssFloorFit = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identity: string, warmupMs: number, windowMs: number): Fit | undefined =>
  commonSlope(
    afterWarmup(samples, generations, identity, warmupMs).map((pts) => {
      if (pts.length === 0) return []
      const from = pts[0]!.t
      const last = pts.at(-1)!.t
      const floors = new Map<number, ProcSample>()
      for (const s of pts) {
        const w = Math.floor((s.t - from) / windowMs)
        if (from + (w + 1) * windowMs > last) continue // the last, partial window
        const low = floors.get(w)
        if (low === undefined || s.rssBytes < low.rssBytes) floors.set(w, s)
      }
      return floors.size < 3 ? [] : [...floors.values()].sort((a, b) => a.t - b.t)
    })
  )

export const latencies = (samples: ReadonlyArray<FreeSample>, inWindow: (from: number, to: number) => boolean) => {
  const deleted = samples.filter((s) => s.why === "deleted")
  return {
    outside: percentiles(deleted.filter((s) => !inWindow(s.started, s.freedAt)).map((s) => s.latencyMs / 1000)),
    inside: percentiles(deleted.filter((s) => inWindow(s.started, s.freedAt)).map((s) => s.latencyMs / 1000)),
    neverRunsAgain: percentiles(samples.filter((s) => s.why !== "deleted").map((s) => s.latencyMs / 1000))
  }
}

const f = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "–")
const pRow = (label: string, p: Percentiles) => [label, p.n, f(p.p50), f(p.p95), f(p.p99), f(p.max)]

/** At most `per` dots per `bucketMs` (the slowest first): the plot stays small, the outliers stay in it. */
const thin = (points: ReadonlyArray<readonly [number, number]>, bucketMs: number, per: number) =>
  [...Map.groupBy(points, (p) => Math.floor(p[0] / bucketMs)).values()].flatMap((l) => l.sort((a, b) => b[1] - a[1]).slice(0, per))

export interface RunFacts {
  readonly title: string
  readonly t0: number
  readonly durationMs: number
  readonly faults: ReadonlyArray<FaultRecord>
  readonly windows: ReadonlyArray<readonly [number, number]>
  readonly samples: ReadonlyArray<ProcSample>
  readonly generations: ReadonlyArray<Generation>
  readonly frees: ReadonlyArray<FreeSample>
}

export const plotOf = (r: RunFacts): string => {
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

export const faultTable = (r: RunFacts): string =>
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

export const latencyTable = (l: Latencies): string =>
  table(["delete → free (s)", "n", "p50", "p95", "p99", "max"], [pRow("deleted, outside fault windows", l.outside), pRow("deleted, inside fault windows", l.inside), pRow("never run again (finished, evicted, dead node), from the moment it qualified", l.neverRunsAgain)])

export const generationTable = (r: RunFacts): string =>
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

export const violationBlocks = (vs: ReadonlyArray<Violation>): string =>
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
export const violationList = (vs: ReadonlyArray<Pick<Violation, "kind" | "summary">>, fullReport: string): string =>
  vs.length === 0
    ? "None."
    : [
        table(["#", "kind", "what"], vs.slice(0, 10).map((v, i) => [String(i + 1), v.kind, v.summary])),
        ...(vs.length > 10 ? [`… and ${vs.length - 10} more.`] : []),
        `Each with the history of the objects involved: ${fullReport}.`
      ].join("\n\n")

/** Each identity's fits: every sample after warm-up, and the floor (judged on; its window `windowMs`, the mass deletions' period). */
export const rssFits = (samples: ReadonlyArray<ProcSample>, generations: ReadonlyArray<Generation>, identities: ReadonlyArray<string>, warmupMs: number, windowMs: number) =>
  identities.map((id) => [id, { all: rssFit(samples, generations, id, warmupMs), floor: rssFloorFit(samples, generations, id, warmupMs, windowMs), windowMs }] as const)

/** Floors spanning less than this (all processes together) say too little about an hourly rate to judge the target on. */
export const MIN_FLOOR_MINUTES = 30

/**
 * Rows for BENCHMARKS.md: the issue's targets and what this run measured; per replica the RSS
 * floor's fit (judged, given MIN_FLOOR_MINUTES of it) and the fit over every sample.
 */
export const targetRows = (scenario: string, violations: number, l: Latencies, fits: ReturnType<typeof rssFits>): ReadonlyArray<Row> => [
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
  )
]
