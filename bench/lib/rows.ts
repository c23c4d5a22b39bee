/** Summary rows and detail tables of the scenarios. */
import { BATCH_STEP, count, type IsolatedRun, type MassRun, type SingleRun, total, writes } from "./scenarios.ts"
import { type Row, row, table, yesNo } from "./report.ts"
import type { Limits } from "./env.ts"
import { type RestReport, wrongAndLost } from "./world.ts"
import { fmt, ms, spread } from "./stats.ts"

/** The mass table's cell of frees at rest: ok, or how many were wrong and lost. */
const wrongLostCell = (rest: RestReport): string => {
  const [wrong, lost] = wrongAndLost(rest)
  return wrong + lost === 0 ? "ok" : `${wrong} wrong, ${lost} lost`
}

export const ratio = (baseline: number, ours: number): string =>
  Number.isFinite(baseline) && Number.isFinite(ours) && ours > 0 ? `${fmt(baseline / ours)}×` : "–"

export const sec = (x: number) => (Number.isFinite(x) ? `${fmt(x / 1000)} s` : "not within timeout")
export const medSpread = (xs: ReadonlyArray<number>, unit: (x: number) => string) => {
  if (xs.length === 0) return "–"
  const s = spread(xs)
  return xs.length === 1 ? unit(s.median) : `${unit(s.median)} (${unit(s.min)}–${unit(s.max)})`
}

export const fullyFreed = (r: { readonly poolFreedMs: number; readonly reservationsFreedMs: number }) => Math.max(r.poolFreedMs, r.reservationsFreedMs)

/** Pool patches of a count, and in brackets those answered 422 (a failed resourceVersion test: a conflict). */
export const poolPatches = (calls: Record<string, number>) => `${count(calls, "patch", "ippools")} (${count(calls, "patch", "ippools", "422")})`

/** CPU seconds by process, as the tables show them (a process not measured, e.g. no contender, left out). */
export const cpuText = (cpu: Record<string, number>) =>
  Object.entries(cpu)
    .filter(([, v]) => !Number.isNaN(v))
    .map(([k, v]) => `${k} ${fmt(v)}`)
    .join(", ")

/** A client-side limit as the tables name it. */
export const limitsText = (l: Limits) =>
  l.perGroup === true ? `client-go default (QPS ${l.qps}/burst ${l.burst} per API group client)` : l.qps > 0 ? `QPS ${l.qps}/burst ${l.burst}` : "no client limit"

/**
 * The median time to free everything, a run that did not finish counted as its timeout: then the
 * median is a lower bound of the real one (that run took longer), and so is a ratio over it.
 */
export const boundedMedian = (runs: ReadonlyArray<MassRun>): { readonly ms: number; readonly timedOut: number } => {
  const freed = runs.map((r) => (Number.isFinite(fullyFreed(r)) ? fullyFreed(r) : undefined))
  return { ms: spread(freed.map((ms, i) => ms ?? runs[i]!.timeoutMs)).median, timedOut: freed.filter((ms) => ms === undefined).length }
}

/** Rows and table of mass-deletion runs (every repetition of both contenders). */
export const massRows = (
  label: string,
  ours: ReadonlyArray<MassRun>,
  baseline: ReadonlyArray<MassRun>,
  target: { readonly seconds?: number; readonly times?: number } = {}
) => {
  const o = spread(ours.map(fullyFreed))
  const b = boundedMedian(baseline)
  const op = spread(ours.map((r) => r.poolFreedMs))
  const bp = spread(baseline.map((r) => r.poolFreedMs))
  // A lower bound when a baseline run timed out: enough to say a "≥ n×" target is met, never more.
  const times = b.ms / o.median
  const met =
    target.seconds === undefined && target.times === undefined
      ? undefined
      : (target.seconds === undefined || o.max <= target.seconds * 1000) && (target.times === undefined || times >= target.times)
  const targetText = [target.seconds === undefined ? undefined : `≤ ${target.seconds} s`, target.times === undefined ? undefined : `≥ ${target.times}× faster`].filter((x) => x !== undefined).join("; ")
  const rows: Array<Row> = [
    row(label, "last delete → every address and reservation free, median (min–max)", {
      ours: medSpread(ours.map(fullyFreed), sec),
      baseline: b.timedOut > 0 ? `> ${sec(b.ms)} (${b.timedOut} of ${baseline.length} runs timed out)` : medSpread(baseline.map(fullyFreed), sec),
      ratio: `${b.timedOut > 0 ? "> " : ""}${ratio(b.ms, o.median)}`,
      target: targetText === "" ? "–" : targetText,
      met: yesNo(met)
    }),
    row(label, "last delete → every pool entry free, median", {
      ours: ours.length === 0 ? "–" : sec(op.median),
      baseline: baseline.length === 0 ? "–" : sec(bp.median),
      ratio: ratio(bp.median, op.median)
    })
  ]
  const all = [...ours, ...baseline]
  const body = table(
    ["run", "limit", "pods / pools", "deletes (window)", "→ pool entries free", "→ reservations free", "→ Events written", "pool patches (422)", "batches", "reservation deletes", "Events", "pod reads", "CPU s (by process)", "invariants at rest"],
    all.map((r, i) => [
      `${r.kind} #${i < ours.length ? i + 1 : i - ours.length + 1}`,
      limitsText(r.limits),
      `${r.pods} / ${r.pools}`,
      ms(r.deleteWindowMs),
      sec(r.poolFreedMs),
      sec(r.reservationsFreedMs),
      sec(r.eventsMs),
      poolPatches(r.calls),
      r.kind === "ours" ? r.batches : "–",
      count(r.calls, "delete", "overlappingrangeipreservations"),
      count(r.calls, "create", "events") + count(r.calls, "patch", "events"),
      `${count(r.calls, "get", "pods")} GET, ${count(r.calls, "list", "pods")} LIST pages`,
      cpuText(r.cpu),
      wrongLostCell(r.rest)
    ])
  )
  return { rows, body }
}

/** A quantity per freed IP of mass runs, their median. */
const per = (runs: ReadonlyArray<MassRun>, f: (r: MassRun) => number) => spread(runs.map((r) => f(r) / (r.pods * r.perPod))).median

/** A row of a quantity per freed IP, ours against the baseline. */
export const perIPRow = (label: string, metric: string, ours: ReadonlyArray<MassRun>, baseline: ReadonlyArray<MassRun>, f: (r: MassRun) => number): Row =>
  row(label, metric, { ours: fmt(per(ours, f)), baseline: fmt(per(baseline, f)), ratio: ratio(per(baseline, f), per(ours, f)) })

/** A count's requests as "verb resource code: n", sorted. */
export const breakdown = (calls: Record<string, number>) =>
  Object.entries(calls)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k}: ${n}`)
    .join(", ")

/** API writes per freed IP of mass runs, against the issue's targets. */
export const writeRows = (label: string, ours: ReadonlyArray<MassRun>, baseline: ReadonlyArray<MassRun>): Array<Row> => {
  const pool = (r: MassRun) => count(r.calls, "patch", "ippools")
  const res = (r: MassRun) => count(r.calls, "delete", "overlappingrangeipreservations")
  const ev = (r: MassRun) => count(r.calls, "create", "events") + count(r.calls, "patch", "events")
  const perIP = (metric: string, f: (r: MassRun) => number) => perIPRow(label, metric, ours, baseline, f)
  const po = per(ours, pool)
  const perBatch = spread(ours.filter((r) => r.batches > 0).map((r) => pool(r) / r.batches)).median
  const batchSize = spread(ours.filter((r) => r.batches > 0).map((r) => r.pods / r.batches)).median
  return [
    row(label, "pool patches per batch (one per pool the batch touched) · pods per batch", {
      ours: `${fmt(perBatch)} · ${fmt(batchSize)}`,
      baseline: "– (one pod, one IP at a time)",
      target: "one patch per pool per round",
      met: yesNo(perBatch <= 10)
    }),
    row(label, "pool writes (IPPool patches) per freed IP", {
      ours: fmt(po),
      baseline: fmt(per(baseline, pool)),
      ratio: ratio(per(baseline, pool), po),
      target: "≤ 0.05",
      met: yesNo(po <= 0.05)
    }),
    perIP("reservation deletes per freed IP", res),
    perIP("Event writes per freed IP", ev),
    perIP("all API writes per freed IP", (r) => writes(r.calls)),
    perIP("all API requests per freed IP (reads too, no watches/leases)", (r) => total(r.calls))
  ]
}

/** Conflict rows of mass runs that raced an allocator. */
export const conflictRows = (label: string, ours: MassRun, baseline: MassRun): { rows: Array<Row>; body: string } => {
  const rate = (r: MassRun) => {
    const all = count(r.calls, "patch", "ippools")
    return all === 0 ? 0 : count(r.calls, "patch", "ippools", "422") / all
  }
  const rest = (r: MassRun) => wrongAndLost(r.rest).join(" / ")
  const pct = (x: number) => `${fmt(100 * x)} %`
  const rows: Array<Row> = [
    row(label, "contender's pool patches that conflicted (HTTP 422)", { ours: pct(rate(ours)), baseline: pct(rate(baseline)), target: "≤ 5 %", met: yesNo(rate(ours) <= 0.05) }),
    row(label, "wrong / lost frees at rest (invariants)", { ours: rest(ours), baseline: rest(baseline), target: "0 / 0", met: yesNo(wrongAndLost(ours.rest).every((n) => n === 0)) })
  ]
  const body = table(
    ["contender", "pods deleted", "allocator pods started (failed, skipped at its bound)", "allocator pool patches (conflicts)", "contender pool patches (422)", "live pods / allocations / reservations at rest", "violations"],
    [ours, baseline].map((r) => [
      r.kind,
      r.pods,
      `${r.allocator?.started ?? 0} (${r.allocator?.failed ?? 0}, ${r.allocator?.skipped ?? 0})`,
      `${r.allocator?.poolPatches ?? 0} (${r.allocator?.poolConflicts ?? 0})`,
      poolPatches(r.calls),
      `${r.rest.livePods} / ${r.rest.allocations} / ${r.rest.reservations}`,
      [...r.rest.liveNotHeld, ...r.rest.deadHeld, ...r.rest.shared, ...r.rest.reservationMissing, ...r.rest.reservationDead].slice(0, 3).join("; ") || "none"
    ])
  )
  return { rows, body }
}

/** The issue's target for single deletions: every pod freed, delete → pool entry gone at p50 ≤ 50 ms, p99 ≤ 500 ms. */
export const singleMet = (r: SingleRun) => r.pool.p50 <= 50 && r.pool.p99 <= 500 && r.completed === r.pods

/** Rows and table of single-deletion runs. */
export const singleRows = (label: string, ours: SingleRun, baseline: SingleRun) => {
  const both = (r: SingleRun) => `${ms(r.pool.p50)} / ${ms(r.pool.p99)}`
  const rows: Array<Row> = [
    row(label, "delete → address free, p50 / p99", {
      ours: both(ours),
      baseline: both(baseline),
      ratio: `${ratio(baseline.pool.p50, ours.pool.p50)} / ${ratio(baseline.pool.p99, ours.pool.p99)}`,
      target: "≤ 50 ms / ≤ 500 ms",
      met: yesNo(singleMet(ours))
    })
  ]
  const load = table(
    ["contender", "limit", "pods, rate", "benchmark's pod DELETE calls p50 / p99", "contender's batches, mean duration", "CPU s (by process)"],
    [ours, baseline].map((r) => [
      r.kind,
      limitsText(r.limits),
      `${r.pods} at ${r.rate}/s`,
      `${ms(r.deleteCall.p50)} / ${ms(r.deleteCall.p99)}`,
      r.steps[BATCH_STEP] === undefined ? "–" : `${r.steps[BATCH_STEP].n}, ${ms(r.steps[BATCH_STEP].mean)}`,
      cpuText(r.cpu)
    ])
  )
  const latency = table(
    ["contender", "limit", "pods, rate", "what", "n", "p50", "p95", "p99", "min", "max", "calls"],
    [ours, baseline].flatMap((r) =>
      (["pool", "reservation"] as const).map((w) => [
        r.kind,
        limitsText(r.limits),
        `${r.pods} at ${r.rate}/s`,
        w === "pool" ? "pool entry gone" : "reservation gone",
        r[w].n,
        ms(r[w].p50),
        ms(r[w].p95),
        ms(r[w].p99),
        ms(r[w].min),
        ms(r[w].max),
        w === "pool" ? breakdown(r.calls) : ""
      ])
    )
  )
  const stepRows = [ours, baseline].flatMap((r) =>
    Object.entries(r.steps).map(([step, s]) => [r.kind, step, s.n, ms(s.mean), ms(s.p50), ms(s.p95), ms(s.p99)])
  )
  const steps =
    stepRows.length === 0
      ? ""
      : `\n\nWhere the time went, from each contender's own histograms over the run (\`workqueue_queue_duration_seconds\`, \`free_batch_duration_seconds\`, \`api_request_duration_seconds\`; quantiles interpolated inside histogram buckets, so approximate):\n\n${table(["contender", "step", "n", "mean", "p50", "p95", "p99"], stepRows)}`
  return { rows, body: `${latency}\n\nHow loaded the server was meanwhile (a DELETE of a pod involves no contender at all; the baseline writes no batch histogram):\n\n${load}${steps}` }
}

/** Rows and table of isolated-pod runs. */
export const isolatedRows = (label: string, ours: IsolatedRun, baseline: IsolatedRun) => {
  const typical = (r: IsolatedRun) => r.samples[r.samples.length - 1] ?? {}
  const text = (c: Record<string, number>) =>
    Object.entries(c)
      .sort()
      .map(([k, n]) => `${n}× ${k.split(" ").slice(0, 2).join(" ")}${k.split(" ")[2] === "200" || k.split(" ")[2] === "201" ? "" : ` (${k.split(" ")[2]})`}`)
      .join(", ")
  const o = typical(ours)
  const poolReads = count(o, "get", "ippools") + count(o, "list", "ippools")
  const met = ours.samples.every((s) => count(s, "patch", "ippools") === 1 && count(s, "delete", "overlappingrangeipreservations") === 1 && count(s, "get", "ippools") + count(s, "list", "ippools") === 0)
  const rows: Array<Row> = [
    row(label, "API calls for one deletion", {
      ours: text(o),
      baseline: text(typical(baseline)),
      ratio: ratio(total(typical(baseline)), total(o)),
      target: "1 patch (+1 reservation delete), 0 list/get of pools",
      met: yesNo(met)
    }),
    row(label, "pool reads for that deletion", { ours: String(poolReads), baseline: String(count(typical(baseline), "get", "ippools")), target: "0", met: yesNo(poolReads === 0) })
  ]
  const body = table(
    ["contender", "sample", "calls (controller side; leases and watches left out)", "delete → free"],
    [ours, baseline].flatMap((r) => r.samples.map((s, i) => [r.kind, i + 1, text(s), ms(r.latencyMs[i])]))
  )
  return { rows, body }
}

/** Client rate limit rows: the highest one-second and ten-second request rates against the limit. */
export const rateRows = (label: string, ours: MassRun, baseline: MassRun, side: "contender" | "server") => {
  const r = (m: MassRun) => (side === "server" ? m.serverRates : m.rates)
  const qps = ours.limits.qps
  const burst = ours.limits.burst
  const o = r(ours)
  const b = r(baseline)
  // The most requests any window between two samples held beyond qps × its length: a token bucket that
  // starts full admits at most burst + qps·T in any T seconds, so ≤ burst when the limit held.
  const excess = (x: typeof o) => {
    if (x === undefined) return undefined
    let worst = 0
    for (const [i, [t0, v0]] of x.points.entries()) {
      for (const [t, v] of x.points.slice(i + 1)) worst = Math.max(worst, v - v0 - (qps * (t - t0)) / 1000)
    }
    return worst
  }
  const eo = excess(o)
  const met = eo === undefined ? undefined : eo <= burst
  const source = side === "server" ? "API server's apiserver_request_total" : "contender's api_requests_total"
  return [
    row(label, `peak requests/s, 1 s windows / 10 s windows (${source})`, {
      ours: o === undefined ? "–" : `${fmt(o.peak)} / ${fmt(o.max10s)}`,
      baseline: b === undefined ? "–" : `${fmt(b.peak)} / ${fmt(b.max10s)}`
    }),
    row(label, `most requests any window between two samples held beyond QPS × its length (${source})`, {
      ours: eo === undefined ? "–" : fmt(eo),
      baseline: excess(b) === undefined ? "–" : fmt(excess(b)!),
      target: `QPS ${qps}, burst ${burst}: ≤ ${burst} (a token bucket admits ≤ burst + QPS·T in T seconds)`,
      met: yesNo(met)
    })
  ]
}
