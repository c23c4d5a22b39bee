/**
 * `release`: frees by hand, through the controller's planner and executor, the orphans an audit
 * report lists (while still the same entry and still an orphan), or what an operator names by pod or
 * pool/IP (refused while a pod of that name may run, unless forced). Every candidate is re-checked
 * live and every write guarded per entry: safe next to a running controller, without a Lease. It
 * prints a row per allocation or reservation asked for, with what became of it, and exits 0 when all
 * is free afterwards (a release run again is done, not failed), else 1.
 */
import { readFile } from "node:fs/promises"
import { text as readAll } from "node:stream/consumers"
import { Data, Effect, Either } from "effect"
import { type AuditReport, decodeAuditReport, matchReport } from "../domain/audit-report.ts"
import { type NamedTargets, type ReleaseRow, type RowResult, namedHoldings } from "../domain/operator-release.ts"
import type { OutputFormat } from "../domain/option-values.ts"
import { listedByIndex } from "../domain/claims.ts"
import { formatIP, ipEquals } from "../domain/ip.ts"
import { type HeldEntry, type HeldReservation, type OwnerPlan, type PlannedEntry, type ReleasePlan, planRelease } from "../domain/release.ts"
import { plural, table } from "./audit.ts"
import type { ReleaseTargets } from "./cli.ts"
import { type Execution, execute } from "./executor.ts"
import { readLivePools } from "./free-pods.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { Pods } from "../services/Pods.ts"
import { recheckHoldings } from "./recheck.ts"
import { listWhereabouts, listWorld, listedPods, sweepHoldings } from "./sweep.ts"
import { claimSource } from "./snapshot.ts"

/** Input release cannot use (a report that cannot be read or is not one): exit code 2. */
export class ReleaseInputError extends Data.TaggedError("ReleaseInputError")<{ readonly message: string }> {}

/** What release was asked to free, with a report read and decoded: the input checked before the cluster is asked anything. */
export type LoadedTargets = { readonly _tag: "Report"; readonly report: AuditReport } | (NamedTargets & { readonly _tag: "Named" })

/** Reads the report (if any; "-": stdin); one that cannot be read or decoded fails with one line naming the file and what is wrong. */
export const loadTargets = (targets: ReleaseTargets): Effect.Effect<LoadedTargets, ReleaseInputError> => {
  if (targets._tag === "Named") return Effect.succeed(targets)
  const { path } = targets
  const shown = path === "-" ? "- (stdin)" : path
  return Effect.tryPromise({
    try: () => (path === "-" ? readAll(process.stdin) : readFile(path, "utf8")),
    catch: (e) => new ReleaseInputError({ message: `--from-report ${shown}: cannot read it: ${e instanceof Error ? e.message : String(e)}` })
  }).pipe(
    Effect.flatMap((text) => Either.mapLeft(decodeAuditReport(text), (why) => new ReleaseInputError({ message: `--from-report ${shown}: ${why}` }))),
    Effect.map((report) => ({ _tag: "Report", report }) as const)
  )
}

/** The report's entries that are still the same and still orphans, judged on a fresh listing as a sweep judges. */
const reportHoldings = (report: AuditReport) =>
  Effect.gen(function* () {
    const world = yield* listWorld(listedPods)
    const { holdings } = yield* sweepHoldings(world)
    const matched = matchReport(report, { ...world, orphans: holdings })
    // What another pod holds left the orphans already (rule 0): nothing more to look for.
    return { ...matched, claims: undefined }
  })

/** What was named by pod and by pool/IP, found in a fresh listing of the pools and reservations. */
const namedHoldingsNow = (targets: NamedTargets) =>
  Effect.gen(function* () {
    const { snapshot } = yield* listWhereabouts
    // Rule 0: who else lists the addresses named, unless --force frees them anyway.
    const claims = targets.force ? undefined : claimSource(listedByIndex(yield* Effect.flatMap(Pods, (pods) => pods.list())), snapshot)
    return { ...namedHoldings(targets, snapshot), claims }
  })

/** What counts as done: the exit code is 0 when every row is, 1 when anything is still held. */
const DONE: ReadonlyArray<RowResult> = ["freed", "would free", "already free"]

const entryRow = (result: RowResult, podref: string, e: HeldEntry, why = ""): ReleaseRow => ({ result, kind: "allocation", name: e.pool, ip: formatIP(e.entry.ip), podref, why })

/** A reservation's address: as listed, else that of the holding's entry it reserves. */
const reservationRow = (result: RowResult, plan: OwnerPlan, r: HeldReservation, why = ""): ReleaseRow => {
  const ip = r.ip ?? plan.holding.entries.find((e) => e.reservation === r.name)?.entry.ip
  return { result, kind: "reservation", name: r.name, ip: ip === undefined ? undefined : formatIP(ip), podref: plan.holding.podref, why }
}

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
const plannedRows = (plan: ReleasePlan): ReadonlyArray<ReleaseRow> =>
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
const executedRows = (plan: ReleasePlan, execution: Execution, goneNow: ReadonlySet<PlannedEntry>): ReadonlyArray<ReleaseRow> => {
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

const counted = (rows: ReadonlyArray<ReleaseRow>, result: RowResult) => rows.filter((r) => r.result === result).length

/** One line: how many addresses and reservations were freed (would be), already free, skipped, refused, failed. */
const summary = (rows: ReadonlyArray<ReleaseRow>, dryRun: boolean): string => {
  const done = rows.filter((r) => r.result === (dryRun ? "would free" : "freed"))
  const what = `${plural(done.filter((r) => r.kind === "allocation").length, "address")} and ${plural(done.filter((r) => r.kind === "reservation").length, "reservation")}`
  const rest = (["already free", "skipped", "refused", "failed"] as const).flatMap((r) => (counted(rows, r) > 0 ? [`${counted(rows, r)} ${r}`] : []))
  return `${dryRun ? "Would free" : "Freed"} ${what}${rest.length === 0 ? "" : `; ${rest.join(", ")}`}.${dryRun ? " (dry run: nothing written)" : ""}`
}

const renderRows = (rows: ReadonlyArray<ReleaseRow>, dryRun: boolean): string => {
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
const renderRowsJson = (rows: ReadonlyArray<ReleaseRow>, dryRun: boolean): string =>
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

const logFreed = (r: ReleaseRow) =>
  Effect.logInfo(r.kind === "allocation" ? "release freed allocation" : "release deleted reservation").pipe(
    Effect.annotateLogs({ ...(r.kind === "allocation" ? { pool: r.name } : { reservation: r.name }), ip: r.ip ?? "", podref: r.podref })
  )

/**
 * The entries the guarded patch left that nothing holds any more, read again: gone from their pool,
 * or now another podref's (freed by another first). A pool that cannot be read proves nothing.
 */
const freedByAnother = (skipped: ReadonlyArray<PlannedEntry>) =>
  Effect.map(readLivePools(new Set(skipped.map((p) => p.held.pool))), ({ pools, errors }) =>
    new Set(skipped.filter(({ held }) => {
      const now = pools.get(held.pool)?.entries.find((e) => ipEquals(e.ip, held.entry.ip))
      return !errors.has(held.pool) && now?.podref !== held.entry.podref
    }))
  )

/** Carries the plan out, with its Events and metrics written before the command ends. */
const carryOut = (plan: ReleasePlan) =>
  Effect.gen(function* () {
    const execution = yield* execute(plan)
    const rows = executedRows(plan, execution, yield* freedByAnother(execution.skipped))
    yield* Effect.forEach(rows.filter((r) => r.result === "freed"), logFreed, { discard: true })
    return rows
  })

/** Runs a release (--dry-run: the plan, nothing written): the text to print and the exit code. */
export const release = (targets: LoadedTargets, output: OutputFormat) =>
  Effect.gen(function* () {
    const { dryRun } = yield* ControllerConfig
    const found = targets._tag === "Report" ? yield* reportHoldings(targets.report) : yield* namedHoldingsNow(targets)
    // Right before the writes: who holds these podrefs now, and their nodes, read live.
    const checked = yield* recheckHoldings(found.holdings, undefined, found.claims)
    const plan = planRelease(checked.holdings, checked.facts)
    const rows = [...(dryRun ? plannedRows(plan) : yield* carryOut(plan)), ...found.skipped]
    yield* Effect.logInfo(`release finished: ${summary(rows, dryRun)}`)
    const text = output === "json" ? renderRowsJson(rows, dryRun) : renderRows(rows, dryRun)
    return { text, exitCode: rows.every((r) => DONE.includes(r.result)) ? 0 : 1 }
  })
