/**
 * `release`: frees by hand, through the controller's planner and executor, the orphans an audit
 * report lists (while still the same entry and still an orphan), or what an operator names by pod or
 * pool/IP (refused while a pod of that name may run, unless forced). Every candidate is re-checked
 * live and every write guarded per entry: safe next to a running controller, without a Lease.
 */
import { readFile } from "node:fs/promises"
import { text as readAll } from "node:stream/consumers"
import { Data, Effect, Either } from "effect"
import { type AuditReport, decodeAuditReport, matchReport } from "../domain/audit-report.ts"
import { type NamedTargets, namedHoldings } from "../domain/operator-release.ts"
import type { OutputFormat } from "../domain/option-values.ts"
import { listedByIndex } from "../domain/claims.ts"
import { ipEquals } from "../domain/ip.ts"
import { type PlannedEntry, type ReleasePlan, planRelease } from "../domain/release.ts"
import type { ReleaseTargets } from "./cli.ts"
import { execute } from "./executor.ts"
import { readLivePools } from "./free-pods.ts"
import { Pods } from "../services/Pods.ts"
import { recheckHoldings } from "./recheck.ts"
import { type ReleaseRow, executedRows, exitCodeOf, plannedRows, renderRows, renderRowsJson, skipRow, summary } from "./release-rows.ts"
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

/** Runs a release: the text to print and the exit code (release-rows.ts). */
export const release = (targets: LoadedTargets, options: { readonly dryRun: boolean; readonly output: OutputFormat }) =>
  Effect.gen(function* () {
    const found = targets._tag === "Report" ? yield* reportHoldings(targets.report) : yield* namedHoldingsNow(targets)
    // Right before the writes: who holds these podrefs now, and their nodes, read live.
    const checked = yield* recheckHoldings(found.holdings, undefined, found.claims)
    const plan = planRelease(checked.holdings, checked.facts)
    const rows = [...(options.dryRun ? plannedRows(plan) : yield* carryOut(plan)), ...found.skipped.map(skipRow)]
    yield* Effect.logInfo(`release finished: ${summary(rows, options.dryRun)}`)
    return { text: options.output === "json" ? renderRowsJson(rows, options.dryRun) : renderRows(rows, options.dryRun), exitCode: exitCodeOf(rows) }
  })
