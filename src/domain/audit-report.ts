/**
 * The report `audit --output json` prints, read back by `release --from-report`: decoded so that
 * what is wrong reads as one line naming the field, and matched against what the pools and
 * reservations hold now (matchReport). Pure.
 */
import { Either, ParseResult, Schema } from "effect"
import { type IPAddress, formatIP, ipEquals, parseIP } from "./ip.ts"
import type { PodProjection } from "./pod.ts"
import type { ParsedPool, ReservationRecord } from "./pool.ts"
import { type ReleaseRow, skipResult } from "./operator-release.ts"
import type { Holding } from "./release.ts"
import { gatherByPodref } from "./holdings.ts"
import { pathText } from "./multus.ts"

const Address = Schema.String.pipe(Schema.filter((s) => parseIP(s) !== undefined, { message: (i) => `${JSON.stringify(i.actual)} is not an IP address` }))
const Name = Schema.String.pipe(Schema.filter((s) => s !== "", { message: () => "is empty" }))

/** One orphaned allocation as audit prints it (its other fields are not needed to find it again). */
const ReportAllocation = Schema.Struct({
  pool: Name,
  ip: Address,
  offset: Schema.optional(Schema.String),
  podref: Name,
  containerId: Schema.optional(Schema.String),
  ifname: Schema.optional(Schema.NullOr(Schema.String))
})
type ReportAllocation = typeof ReportAllocation.Type

const ReportReservation = Schema.Struct({
  name: Name,
  podref: Name,
  ip: Schema.optional(Schema.NullOr(Schema.String))
})
type ReportReservation = typeof ReportReservation.Type

export const AuditReport = Schema.Struct({
  orphanedAllocations: Schema.Array(ReportAllocation),
  orphanedReservations: Schema.Array(ReportReservation)
})
export type AuditReport = typeof AuditReport.Type

/** The report in `text`, or one line saying what is wrong with it (the first problem, with where). */
export const decodeAuditReport = (text: string): Either.Either<AuditReport, string> => {
  if (text.trim() === "") return Either.left("is empty (expected the JSON that audit --output json prints)")
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    // `npm run audit > file` puts npm's banner ("> whereabouts-controller@… audit") before the report.
    const hint = text.trimStart().startsWith(">") ? "npm run prints a banner on stdout: use npm run -s" : "audit --output json prints the report this reads"
    return Either.left(`is not JSON (${(e as Error).message.replace(/\s+/g, " ")}); ${hint}`)
  }
  return Either.mapLeft(Schema.decodeUnknownEither(AuditReport, { onExcessProperty: "ignore" })(json), (error) => {
    const [first] = ParseResult.ArrayFormatter.formatErrorSync(error)
    if (first === undefined) return "is not an audit report"
    const where = pathText(first.path)
    const message = first._tag === "Missing" ? "is missing" : first.message
    return where === "" ? `is not an audit report: ${message}` : `${where} ${message}`
  })
}

/** What is listed now: the pools, the reservations, the pods, and the sweep's orphans as holdings. */
interface CurrentState {
  readonly pools: ReadonlyMap<string, ParsedPool>
  readonly reservations: ReadonlyMap<string, ReservationRecord>
  readonly pods: ReadonlyMap<string, PodProjection>
  readonly orphans: ReadonlyArray<Holding>
}

/** Why an entry that is still the report's is not an orphan any more. */
const heldNow = (podref: string, pods: CurrentState["pods"]): string => {
  const pod = pods.get(podref)
  return `no longer an orphan: pod ${podref}${pod === undefined ? "" : ` (uid ${pod.uid})`} exists and may hold it`
}

/** Why the report's entry is not to be freed now: gone (free already), or changed while its podref still holds it. */
type Changed = { readonly why: string; readonly free: boolean }

/** Why the pool's entry for the report's address is not the one the report saw, or undefined when it is. */
const changedEntry = (r: ReportAllocation, ip: IPAddress, pool: ParsedPool | undefined): Changed | undefined => {
  const free = (why: string): Changed => ({ why, free: true })
  const held = (why: string): Changed => ({ why, free: false })
  if (pool === undefined) return free(`already freed: pool ${r.pool} no longer exists`)
  const entry = pool.entries.find((e) => ipEquals(e.ip, ip))
  if (entry === undefined) return free(`already freed: pool ${r.pool} holds no allocation of ${formatIP(ip)}`)
  if (entry.podref !== r.podref) return free(`already freed: ${formatIP(ip)} now belongs to ${entry.podref}`)
  if (r.offset !== undefined && entry.key !== r.offset) return held(`changed since the report: ${formatIP(ip)} is now at offset ${entry.key} (was ${r.offset})`)
  if (r.containerId !== undefined && entry.id !== r.containerId) return held(`changed since the report: container id ${entry.id} (was ${r.containerId}): a pod of that name took it back`)
  if (r.ifname !== undefined && r.ifname !== null && (entry.ifname ?? "") !== r.ifname) return held(`changed since the report: interface ${entry.ifname ?? "(none)"} (was ${r.ifname})`)
  return undefined
}

const changedReservation = (r: ReportReservation, listed: ReservationRecord | undefined): Changed | undefined => {
  if (listed === undefined) return { why: `already deleted: no reservation ${r.name}`, free: true }
  if (listed.podref !== r.podref) return { why: `already freed: reservation ${r.name} now belongs to ${listed.podref}`, free: true }
  return undefined
}

/**
 * The report's entries that are still the one it saw (pool, address, podref, and container id and
 * interface where it has them) and still orphans by the sweep's rule, as holdings marked as an
 * operator's release; every other entry skipped with why, already free when the report's holder no
 * longer holds it (a retried release is done, not failed). A reservation whose address stays
 * allocated (its allocation not in the report, or skipped) stays too.
 */
export const matchReport = (report: AuditReport, now: CurrentState): { readonly holdings: ReadonlyArray<Holding>; readonly skipped: ReadonlyArray<ReleaseRow> } => {
  const skipped: Array<ReleaseRow> = []
  const { byRef: picked, of: pick } = gatherByPodref()
  const orphans = new Map(now.orphans.map((h) => [h.podref, h] as const))
  for (const r of report.orphanedAllocations) {
    const ip = parseIP(r.ip)!
    const skip = (why: string, free = false) => skipped.push({ result: skipResult(free), kind: "allocation", name: r.pool, ip: formatIP(ip), podref: r.podref, why })
    const changed = changedEntry(r, ip, now.pools.get(r.pool))
    if (changed !== undefined) skip(changed.why, changed.free)
    else {
      const held = orphans.get(r.podref)?.entries.find((e) => e.pool === r.pool && ipEquals(e.entry.ip, ip))
      if (held === undefined) skip(heldNow(r.podref, now.pods))
      else if (!pick(r.podref).entries.includes(held)) pick(r.podref).entries.push(held)
    }
  }
  for (const r of report.orphanedReservations) {
    const skip = (why: string, free = false) => skipped.push({ result: skipResult(free), kind: "reservation", name: r.name, ip: r.ip ?? undefined, podref: r.podref, why })
    const changed = changedReservation(r, now.reservations.get(r.name))
    const holding = orphans.get(r.podref)
    const held = holding?.reservations.find((h) => h.name === r.name)
    const staying = holding?.entries.find((e) => e.reservation === r.name && !(picked.get(r.podref)?.entries.includes(e) ?? false))
    if (changed !== undefined) skip(changed.why, changed.free)
    else if (held === undefined) skip(heldNow(r.podref, now.pods))
    else if (staying !== undefined) skip(`its address ${formatIP(staying.entry.ip)} stays allocated in pool ${staying.pool} (not released from this report)`)
    else if (!pick(r.podref).reservations.includes(held)) pick(r.podref).reservations.push(held)
  }
  const holdings = [...picked].map(([podref, p]): Holding => ({ ...orphans.get(podref)!, ...p, operator: { force: false } }))
  return { holdings, skipped }
}
