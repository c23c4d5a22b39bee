/** `audit`: the sweep in dry-run, once, rendered for an operator (table or JSON); exit code 1 on orphans. */
import { Effect } from "effect"
import { formatIP } from "../domain/ip.ts"
import { ORPHAN_REASON_TEXT, type SweepReport, runSweep } from "./sweep.ts"

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(widths[i]!)).join("   ").trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

const percent = (used: number, size: number) => (size === 0 ? "-" : `${((used / size) * 100).toFixed(1)}%`)

/** Human-readable report. */
export const renderTable = (r: SweepReport): string => {
  const pools = table(
    ["POOL", "RANGE", "NETWORK", "SIZE", "USED", "FREE", "USED%", "ORPHANS"],
    r.pools.map((p) => [p.name, p.range, p.network || "-", String(p.size), String(p.used), String(p.free), percent(p.used, p.size), String(p.orphans)])
  )
  const allocations =
    r.orphanAllocations.length === 0
      ? "No orphaned allocations."
      : table(
          ["POOL", "IP", "OFFSET", "PODREF", "IFNAME", "REASON"],
          r.orphanAllocations.map((o) => [o.pool, formatIP(o.entry.ip), o.entry.key, o.entry.podref, o.entry.ifname ?? "", ORPHAN_REASON_TEXT[o.reason]])
        )
  const reservations =
    r.orphanReservations.length === 0
      ? "No orphaned reservations."
      : table(
          ["RESERVATION", "IP", "PODREF", "REASON"],
          r.orphanReservations.map((o) => [o.name, o.ip === undefined ? "?" : formatIP(o.ip), o.podref, ORPHAN_REASON_TEXT[o.reason]])
        )
  return [pools, "", "Orphaned allocations:", allocations, "", "Orphaned reservations:", reservations, ""].join("\n")
}

/** Machine-readable report. */
export const renderJson = (r: SweepReport): string =>
  JSON.stringify(
    {
      pools: r.pools,
      orphanedAllocations: r.orphanAllocations.map((o) => ({
        pool: o.pool,
        ip: formatIP(o.entry.ip),
        offset: o.entry.key,
        podref: o.entry.podref,
        containerId: o.entry.id,
        ifname: o.entry.ifname ?? null,
        reason: o.reason,
        explanation: ORPHAN_REASON_TEXT[o.reason]
      })),
      orphanedReservations: r.orphanReservations.map((o) => ({
        name: o.name,
        ip: o.ip === undefined ? null : formatIP(o.ip),
        network: o.networkName ?? null,
        podref: o.podref,
        reason: o.reason,
        explanation: ORPHAN_REASON_TEXT[o.reason]
      }))
    },
    null,
    2
  )

/** Runs the audit and returns the text to print and the exit code. */
export const audit = (output: "table" | "json") =>
  Effect.map(runSweep({ dryRun: true }), (report) => ({
    text: output === "json" ? renderJson(report) : renderTable(report),
    exitCode: report.orphanAllocations.length + report.orphanReservations.length > 0 ? 1 : 0
  }))
