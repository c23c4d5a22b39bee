/**
 * What `release` prints: a row per allocation or reservation asked for, with what became of it, and
 * the exit code they make (0 when all is free afterwards: a release run again is done, not failed).
 */
import type { Skip } from "../domain/operator-release.ts"
import { formatIP } from "../domain/ip.ts"
import type { HeldEntry, HeldReservation, OwnerPlan, PlannedEntry, ReleasePlan } from "../domain/release.ts"
import { plural, table } from "./audit.ts"
import type { Execution } from "./executor.ts"

/** "already free": nothing holds it now; "refused": a pod of that name may run (--force); "skipped": changed, or kept by the rules. */
export type RowResult = "freed" | "would free" | "already free" | "skipped" | "refused" | "failed"

/** What counts as done for the exit code. */
const DONE: ReadonlyArray<RowResult> = ["freed", "would free", "already free"]

/** What release was asked to free (named as a Skip names it) and what became of it. */
export interface ReleaseRow extends Omit<Skip, "alreadyFree"> {
  readonly result: RowResult
  /** Why it was not freed now ("" for what was). */
  readonly why: string
}

const entryRow = (result: RowResult, podref: string, e: HeldEntry, why = ""): ReleaseRow => ({ result, kind: "allocation", name: e.pool, ip: formatIP(e.entry.ip), podref, why })

/** A reservation's address: as listed, else that of the holding's entry it reserves. */
const reservationRow = (result: RowResult, plan: OwnerPlan, r: HeldReservation, why = ""): ReleaseRow => {
  const ip = r.ip ?? plan.holding.entries.find((e) => e.reservation === r.name)?.entry.ip
  return { result, kind: "reservation", name: r.name, ip: ip === undefined ? undefined : formatIP(ip), podref: plan.holding.podref, why }
}

export const skipRow = ({ alreadyFree, ...s }: Skip): ReleaseRow => ({ result: alreadyFree === true ? "already free" : "skipped", ...s })

/** What a plan keeps or cannot do: an operator's named pod that may run is refused, the rest skipped. */
const keptRows = (plan: OwnerPlan): ReadonlyArray<ReleaseRow> => {
  const ref = plan.holding.podref
  if (plan.decision === "failed") {
    const why = plan.holding.error?.message ?? "cannot be released"
    return [...plan.holding.entries.map((e) => entryRow("failed", ref, e, why)), ...plan.holding.reservations.map((r) => reservationRow("failed", plan, r, why))]
  }
  const result: RowResult = plan.holding.claim === "Operator" ? "refused" : "skipped"
  return plan.kept.map((k) => (k.entry !== undefined ? entryRow(result, ref, k.entry, k.why) : reservationRow(result, plan, k.reservation, k.why)))
}

/** Rows of a plan that was not carried out (dry-run). */
export const plannedRows = (plan: ReleasePlan): ReadonlyArray<ReleaseRow> =>
  plan.owners.flatMap((o) => [
    ...o.entries.map((p) => entryRow("would free", o.holding.podref, p.held)),
    ...o.reservations.map((r) => reservationRow("would free", o, r)),
    ...keptRows(o)
  ])

/** Why an owner's planned write did not happen: its error. */
const errorOf = (execution: Execution, podref: string): string => {
  const outcome = execution.outcomes.get(podref)
  return outcome?._tag === "Failed" || outcome?._tag === "PartlyFreed" ? outcome.error.message : "not written"
}

/** Rows of a plan carried out; `goneNow`: the entries the guarded patch left that a read afterwards found free. */
export const executedRows = (plan: ReleasePlan, execution: Execution, goneNow: ReadonlySet<PlannedEntry>): ReadonlyArray<ReleaseRow> => {
  const released = new Set<PlannedEntry>(execution.released)
  const skipped = new Set<PlannedEntry>(execution.skipped)
  return plan.owners.flatMap((o) => {
    const ref = o.holding.podref
    const done = execution.reservations.get(ref)
    const entries = o.entries.map((p) =>
      released.has(p)
        ? entryRow("freed", ref, p.held)
        : goneNow.has(p)
          ? entryRow("already free", ref, p.held, "freed by another right before the write")
          : skipped.has(p)
            ? entryRow("skipped", ref, p.held, "changed right before the write (the guarded patch left it): no longer the entry read")
            : entryRow("failed", ref, p.held, errorOf(execution, ref))
    )
    const reservations = o.reservations.map((r) => {
      if (done?.deleted.has(r.name) === true && execution.restored.has(r.name)) return reservationRow("skipped", o, r, "given back: its address was taken back before the pool write")
      if (done?.deleted.has(r.name) === true) return reservationRow("freed", o, r)
      if (done?.reassigned.has(r.name) === true) return reservationRow("already free", o, r, "changed since it was read (now another pod's): left alone")
      if (done === undefined || done.error !== undefined) return reservationRow("failed", o, r, done?.error?.message ?? errorOf(execution, ref))
      return reservationRow("already free", o, r, "already deleted")
    })
    return [...entries, ...reservations, ...keptRows(o)]
  })
}

/** 0 when everything asked for is free afterwards, 1 when anything is still held. */
export const exitCodeOf = (rows: ReadonlyArray<ReleaseRow>): number => (rows.every((r) => DONE.includes(r.result)) ? 0 : 1)

const counted = (rows: ReadonlyArray<ReleaseRow>, result: RowResult) => rows.filter((r) => r.result === result).length

/** One line: how many addresses and reservations were freed (would be), already free, skipped, refused, failed. */
export const summary = (rows: ReadonlyArray<ReleaseRow>, dryRun: boolean): string => {
  const done = rows.filter((r) => r.result === (dryRun ? "would free" : "freed"))
  const what = `${plural(done.filter((r) => r.kind === "allocation").length, "address")} and ${plural(done.filter((r) => r.kind === "reservation").length, "reservation")}`
  const rest = (["already free", "skipped", "refused", "failed"] as const).flatMap((r) => (counted(rows, r) > 0 ? [`${counted(rows, r)} ${r}`] : []))
  return `${dryRun ? "Would free" : "Freed"} ${what}${rest.length === 0 ? "" : `; ${rest.join(", ")}`}.${dryRun ? " (dry run: nothing written)" : ""}`
}

export const renderRows = (rows: ReadonlyArray<ReleaseRow>, dryRun: boolean): string => {
  if (rows.length === 0) return "Nothing to release."
  const body = table(
    ["RESULT", "KIND", "POOL/RESERVATION", "IP", "PODREF", "REASON"],
    rows.map((r) => [r.result, r.kind, r.name || "-", r.ip ?? "-", r.podref || "-", r.why])
  )
  return `${body}\n\n${summary(rows, dryRun)}`
}

const jsonRow = (r: ReleaseRow) => ({
  kind: r.kind,
  ...(r.kind === "allocation" ? { pool: r.name } : r.kind === "reservation" ? { name: r.name } : {}),
  ip: r.ip ?? null,
  podref: r.podref
})

/** Machine-readable result: what was freed (wouldFree in dry-run), what was already free, and what was not freed, with the reason. */
export const renderRowsJson = (rows: ReadonlyArray<ReleaseRow>, dryRun: boolean): string =>
  JSON.stringify(
    {
      dryRun,
      [dryRun ? "wouldFree" : "freed"]: rows.filter((r) => r.result === "freed" || r.result === "would free").map(jsonRow),
      alreadyFree: rows.filter((r) => r.result === "already free").map((r) => ({ ...jsonRow(r), reason: r.why })),
      skipped: rows.filter((r) => !DONE.includes(r.result)).map((r) => ({ result: r.result, ...jsonRow(r), reason: r.why }))
    },
    null,
    2
  )
