/**
 * `audit`: the sweep in dry-run, once, rendered for an operator (table or JSON), with the
 * invariants judged on the same listing and the bad input it met. Exit code 4 on an invariant
 * violation (a live pod's address at risk is worse than a leak), else 1 on orphans.
 */
import { Effect } from "effect"
import { hasBadInput } from "../domain/bad-input.ts"
import { type IPAddress, formatIP } from "../domain/ip.ts"
import type { OutputFormat } from "../domain/option-values.ts"
import { ORPHAN_REASON_TEXT } from "../domain/orphans.ts"
import { podRef } from "../domain/pod.ts"
import { type SweepReport, runSweep } from "./sweep.ts"

/** Columns padded to their widest cell, three spaces apart. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(widths[i]!)).join("   ").trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

/** "1 address", "2 addresses", "3 pools". */
export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : word.endsWith("s") ? "es" : "s"}`

type Reasoned = { readonly reason: keyof typeof ORPHAN_REASON_TEXT; readonly detail?: string | undefined }

/** The reason in words, with why a pod that still exists will never run again. */
const explain = (o: Reasoned) => (o.detail === undefined ? ORPHAN_REASON_TEXT[o.reason] : `${ORPHAN_REASON_TEXT[o.reason]} (${o.detail})`)

const percent = (used: number, size: number) => (size === 0 ? "-" : `${((used / size) * 100).toFixed(1)}%`)

/** A titled table after a blank line; without rows, `none` under the title, or nothing. */
const section = (title: string, header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>, none?: string) =>
  rows.length > 0 ? ["", title, table(header, rows)] : none === undefined ? [] : ["", title, none]

/** Entries and reservations named for one pod while another live pod lists their address: kept (rule 0). */
const heldForAnotherTable = (r: SweepReport): ReadonlyArray<string> =>
  section(
    "Held for another (kept: a live pod lists the address, but the entry names another podref; see docs/rules.md):",
    ["KIND", "NAME", "IP", "PODREF", "LISTED BY"],
    r.heldForAnother.map((h) => [h.kind, h.name, h.ip === undefined ? "?" : formatIP(h.ip), h.podref, h.claimants.join(",")])
  )

/** Exit code of an audit that found invariant violations, with or without orphans. */
export const EXIT_VIOLATIONS = 4

/** The invariant violations, and how many the listing showed for pods not settled long enough to judge. */
const violationsTable = (r: SweepReport): ReadonlyArray<string> => {
  const judged = r.invariants
  if (judged === undefined) return []
  const unsettled = judged.notJudged === 0 ? [] : [`(${judged.notJudged} more in the listing involve pods not Ready for --invariant-grace, or changed since: run audit again to judge them)`]
  if (judged.violations.length === 0) return ["", "No invariant violations.", ...unsettled]
  const rows = judged.violations.map((v) => [v.kind, formatIP(v.ip), v.pods.map(podRef).join(","), v.pools.join(","), v.reservation ?? "-", v.holder ?? "-"])
  const title = "Invariant violations (running pods whose addresses are at risk; what each kind means and what to do: docs/runbooks.md):"
  return [...section(title, ["KIND", "IP", "PODS", "POOL", "RESERVATION", "NAMES"], rows), ...unsettled]
}

/** What audit could not read, one section per kind met: listed, not counted (bad input alone exits 0). */
const badInputTables = ({ badInput: b }: SweepReport): ReadonlyArray<string> => {
  if (!hasBadInput(b)) return ["", "No bad input."]
  return [
    ...section("NADs whose config cannot be read:", ["NAD", "WHY"], b.nads.map((n) => [`${n.namespace}/${n.name}`, n.why])),
    ...section("Pool entries that cannot be parsed (left as they are):", ["POOL", "KEY", "REASON"], b.poolEntries.map((e) => [e.pool, e.key, e.reason])),
    ...section("Pods whose Multus annotations cannot be read:", ["POD", "ANNOTATION", "WHY"], b.pods.map((p) => [`${p.namespace}/${p.name}`, p.annotation, p.why]))
  ]
}

const renderTable = (r: SweepReport): string => {
  // A NODE column only where node-slice pools exist.
  const sliced = r.pools.some((p) => p.node !== undefined)
  const pools = table(
    ["POOL", "RANGE", "NETWORK", ...(sliced ? ["NODE"] : []), "SIZE", "USED", "FREE", "USED%", "ORPHANS", "SIZE FROM"],
    r.pools.map((p) => [
      p.name, p.range, p.network || "-", ...(sliced ? [p.node ?? "-"] : []),
      String(p.size), String(p.used), String(p.free), percent(p.size - p.free, p.size), String(p.orphans), p.sizeFrom === "config" ? "NAD config" : "range only"
    ])
  )
  const stale = section(
    "Node-slice pools no node owns (their NodeSlicePool gives the slice to no node, or to another; --prune-slice-pools deletes them once empty):",
    ["POOL", "NODE", "USED"],
    r.staleSlicePools.map((p) => [p.name, p.node, String(p.used)])
  )
  const allocations = section("Orphaned allocations:", ["POOL", "IP", "OFFSET", "PODREF", "IFNAME", "REASON"],
    r.orphanAllocations.map((o) => [o.pool, formatIP(o.entry.ip), o.entry.key, o.entry.podref, o.entry.ifname ?? "", explain(o)]), "No orphaned allocations.")
  const reservations = section("Orphaned reservations:", ["RESERVATION", "IP", "PODREF", "REASON"],
    r.orphanReservations.map((o) => [o.name, o.ip === undefined ? "?" : formatIP(o.ip), o.podref, explain(o)]), "No orphaned reservations.")
  return [pools, ...stale, ...allocations, ...reservations, ...heldForAnotherTable(r), ...violationsTable(r), ...badInputTables(r), ""].join("\n")
}

const renderJson = (r: SweepReport): string => {
  const ip = (a: IPAddress | undefined) => (a === undefined ? null : formatIP(a))
  const why = (o: Reasoned) => ({ reason: o.reason, ...(o.detail === undefined ? {} : { detail: o.detail }), explanation: explain(o) })
  return JSON.stringify(
    {
      pools: r.pools,
      staleSlicePools: r.staleSlicePools,
      orphanedAllocations: r.orphanAllocations.map((o) => ({
        pool: o.pool, ip: formatIP(o.entry.ip), offset: o.entry.key, podref: o.entry.podref, containerId: o.entry.id, ifname: o.entry.ifname ?? null,
        ...why(o)
      })),
      heldForAnother: r.heldForAnother.map((h) => ({ kind: h.kind, name: h.name, ip: ip(h.ip), podref: h.podref, listedBy: h.claimants })),
      orphanedReservations: r.orphanReservations.map((o) => ({ name: o.name, ip: ip(o.ip), network: o.networkName ?? null, podref: o.podref, ...why(o) })),
      ...(r.invariants === undefined
        ? {}
        : {
            invariantViolations: r.invariants.violations.map((v) => ({
              kind: v.kind, ip: formatIP(v.ip), pods: v.pods.map(podRef), pools: v.pools,
              reservation: v.reservation ?? null, names: v.holder ?? null, message: v.message
            })),
            invariantViolationsNotJudged: r.invariants.notJudged
          }),
      badInput: r.badInput
    },
    null,
    2
  )
}

/** Runs the audit and returns the text to print and the exit code. */
export const audit = (output: OutputFormat) =>
  Effect.map(runSweep({ dryRun: true, audit: true }), (report) => ({
    text: output === "json" ? renderJson(report) : renderTable(report),
    exitCode: (report.invariants?.violations.length ?? 0) > 0 ? EXIT_VIOLATIONS : report.orphanAllocations.length + report.orphanReservations.length > 0 ? 1 : 0
  }))
