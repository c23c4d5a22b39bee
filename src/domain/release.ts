/**
 * The release planner: what may be freed, decided in one place for every path (the deletion loop,
 * the sweep, audit, the release command). Pure: from each candidate's `Holding` (holdings.ts) and
 * the live re-check of its podref to a `ReleasePlan` — the entries to remove, the reservations to
 * delete, their Events, and why anything is kept — which src/programs/executor.ts carries out.
 *
 * The safety rules, numbered as docs/rules.md numbers them (which says each in full):
 * 0. An address another live pod's network-status lists in the same collision domain (claims.ts)
 *    is kept, whichever podref its entry or reservation names, and reported as held for another;
 *    a pod that will never run again (rule 7) holds nothing, nor one whose use of the address is
 *    on record as its own in another pool (its entry, and the reservation naming it). Only --force frees it.
 * 1. Only what a dead pod held: found by holdings.ts, or the sweep's orphans (orphans.ts).
 * 2. An entry is freed only while the live re-check finds no pod of its podref, or (the sweep) the
 *    live pod's status proves it does not hold the address. A namesake that exists keeps everything.
 * 3. Every removal is guarded by `test` ops on the entry's podref and id: an entry rewritten since
 *    (a reborn pod's re-ADD changes the id) is skipped, never freed.
 * 4. Reservations go before the entries they guard (an ADD never meets a free address still
 *    reserved); one changed since it was seen is left alone; one stays with an entry that stays.
 * 5. A reservation deleted for an entry the release then skipped (taken back) is given back.
 * 6. The Normal Event is written only for an entry actually removed.
 * 7. A pod that still exists is freed only when it will never run again (never-runs-again.ts),
 *    judged again on that same incarnation (uid) and its node, read live.
 * 8. Failures are visible (retries, give-up); bad input skips only what it describes.
 * 9. What an operator asks to free goes through the same rules: a report's orphans as the sweep's,
 *    a pod or address named by hand only while no pod of that name exists or it will never run
 *    again, unless forced (still guarded per entry); counted under trigger "operator", Events say so.
 */
import { Data } from "effect"
import { heldReservationIP, reservationIPs, stillClaims } from "./claims.ts"
import { type EventIntent, OPERATOR_FORCED_NOTE, OPERATOR_RELEASE_NOTE, REASON_GARBAGE_COLLECTED, garbageCollectedMessage, podObject } from "./events.ts"
import { type IPAddress, formatIP } from "./ip.ts"
import { type ReservationOrphanReason, entryVerdict, reservationVerdict } from "./orphans.ts"
import { NEVER_RUNS_AGAIN_REASONS, type NeverRunsAgain } from "./never-runs-again.ts"
import { type PodIdentity, type PodProjection, podRef } from "./pod.ts"
import type { PoolEntry, ReservationRecord } from "./pool.ts"

/** The `trigger` label of `ips_freed_total`: what found a candidate, why its pod will never run again, or an operator. */
export const FREE_TRIGGERS = ["deletion", "sweep", ...NEVER_RUNS_AGAIN_REASONS, "operator"] as const
export type FreeTrigger = (typeof FREE_TRIGGERS)[number]

/**
 * Why a candidate's addresses are thought free: its pod was deleted; the sweep found nobody
 * holding them; its pod (this uid) will never run again; or an operator named them.
 */
export type Claim = "Deleted" | "Orphan" | "NeverRunsAgain" | "Operator"

/** Why a candidate could not be (fully) released. */
export class ReleaseError extends Data.TaggedError("ReleaseError")<{
  readonly reason: "ApiError" | "BadAnnotation" | "BadNadConfig"
  readonly pod: string
  readonly retryable: boolean
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `pod ${this.pod}: ${this.reason}: ${this.detail}`
  }
}

/** Bad input that skipped what it describes; `text` names the object, the field and what was wrong. */
export interface Problem {
  readonly reason: "BadAnnotation" | "BadNadConfig"
  readonly text: string
}

/** A pool entry a candidate holds. */
export interface HeldEntry {
  readonly pool: string
  readonly entry: PoolEntry
  /** What its Event names: the NAD's name, else the pool's network, else the pool. */
  readonly network: string
  /** The reservation of its address, when its network keeps reservations. */
  readonly reservation: string | undefined
  /** Other pods whose status lists this address in its collision domain (rule 0), to be confirmed live. */
  readonly claimants?: ReadonlyArray<string> | undefined
}

/** A reservation a candidate holds. */
export interface HeldReservation {
  readonly name: string
  /** As last seen: deleted only if unchanged since (its resourceVersion). */
  readonly listed: ReservationRecord | undefined
  readonly ip: IPAddress | undefined
  /** The sweep's finding; undefined for a deleted pod's. */
  readonly orphan: ReservationOrphanReason | undefined
  readonly claimants?: ReadonlyArray<string> | undefined
}

/** Everything one podref holds, as the caches or the sweep's listing show it. */
export interface Holding {
  readonly podref: string
  /** The pod its Events are about (uid "" when unknown); undefined for a podref that is not namespace/name. */
  readonly pod: PodIdentity | undefined
  readonly claim: Claim
  readonly trigger: FreeTrigger
  readonly entries: ReadonlyArray<HeldEntry>
  readonly reservations: ReadonlyArray<HeldReservation>
  /** Bad input met finding it (a Warning each, saying what was freed anyway). */
  readonly problems: ReadonlyArray<Problem>
  /** Written only when something of this podref was freed (a NAD gone, but its addresses found). */
  readonly ifFreed: ReadonlyArray<EventIntent>
  /** Set when the holding cannot be released at all; nothing of it is planned. */
  readonly error: ReleaseError | undefined
  /** An operator's release (rule 9); `force` (claim Operator only) frees what a pod that may still run holds. */
  readonly operator?: { readonly force: boolean } | undefined
}

/** One entry to remove, guarded by its podref and id, with the Event its removal writes. */
export interface PlannedEntry {
  readonly owner: string
  readonly held: HeldEntry
  readonly event: EventIntent | undefined
}

/** One candidate in the plan. */
export interface OwnerPlan {
  readonly holding: Holding
  /** What its frees count under (for a pod that will never run again: why, as the re-check found it). */
  readonly trigger: FreeTrigger
  /** "kept": a live pod holds it all; "failed": not plannable; "nothing": held nothing. */
  readonly decision: "release" | "kept" | "failed" | "nothing"
  readonly entries: ReadonlyArray<PlannedEntry>
  readonly reservations: ReadonlyArray<HeldReservation>
  readonly kept: ReadonlyArray<Kept>
}

/** Something a plan keeps, and why; `heldFor` names the other live pod that lists its address (rule 0). */
export type Kept = { readonly what: string; readonly why: string; readonly heldFor?: string } & (
  | { readonly entry: HeldEntry; readonly reservation?: undefined }
  | { readonly reservation: HeldReservation; readonly entry?: undefined }
)

const keptEntry = (entry: HeldEntry, why: string): Kept => ({ what: `${entry.pool} ${formatIP(entry.entry.ip)}`, why, entry })
const keptReservation = (reservation: HeldReservation, why: string): Kept => ({ what: `reservation ${reservation.name}`, why, reservation })

export interface ReleasePlan {
  readonly owners: ReadonlyArray<OwnerPlan>
}

/** What the live re-check found: the pod now named by each re-checked podref (absent: no such pod). */
export type LivePods = ReadonlyMap<string, PodProjection>

/** What the planner judges with: the live pods, and the never-run-again rule on freshly read facts. */
export interface LivenessFacts {
  readonly live: LivePods
  /** Absent: no pod is taken to never run again. */
  readonly neverRunsAgain?: ((pod: PodProjection) => NeverRunsAgain | undefined) | undefined
}

/** The podrefs worth a live re-check: those that hold something and can be planned. */
export const recheckTargets = (holdings: ReadonlyArray<Holding>): ReadonlyArray<Holding> =>
  holdings.filter((h) => h.error === undefined && (h.entries.length > 0 || h.reservations.length > 0))

const emptyPlan = (holding: Holding, decision: OwnerPlan["decision"], kept: ReadonlyArray<Kept> = []): OwnerPlan =>
  ({ holding, trigger: holding.trigger, decision, entries: [], reservations: [], kept })

const keptAll = (holding: Holding, why: string): OwnerPlan =>
  emptyPlan(holding, "kept", [...holding.entries.map((e) => keptEntry(e, why)), ...holding.reservations.map((r) => keptReservation(r, why))])

/** The reservations of entries that stay: an address kept must stay reserved. */
const reservationsOf = (entries: ReadonlyArray<HeldEntry>): ReadonlySet<string> => new Set(entries.flatMap((e) => e.reservation ?? []))

/**
 * The plan that frees what the verdicts let go (a verdict is why something stays), each removed
 * entry with its Event; `why` is the never-run-again finding that let it, `forced` an operator's --force.
 */
const planWith = (
  holding: Holding,
  live: PodProjection | undefined,
  verdicts: { readonly entry: (e: HeldEntry) => string | undefined; readonly reservation: (r: HeldReservation) => string | undefined },
  why?: NeverRunsAgain,
  forced = false
): OwnerPlan => {
  // A pod that exists is the one the Events are about (the holding may not know its uid).
  const pod = holding.pod
  const regarding = pod === undefined ? undefined : podObject({ ...pod, uid: pod.uid === "" ? (live?.uid ?? "") : pod.uid })
  const note = holding.operator === undefined ? undefined : forced ? OPERATOR_FORCED_NOTE : OPERATOR_RELEASE_NOTE
  const kept: Array<Kept> = []
  const entries: Array<PlannedEntry> = []
  for (const held of holding.entries) {
    const verdict = verdicts.entry(held)
    if (verdict !== undefined) kept.push(keptEntry(held, verdict))
    else entries.push({ owner: holding.podref, held, event: regarding === undefined ? undefined : gcEvent(regarding, held, why?.detail, note) })
  }
  const stays = reservationsOf(holding.entries.filter((h) => !entries.some((p) => p.held === h)))
  const reservations: Array<HeldReservation> = []
  for (const r of holding.reservations) {
    const verdict = stays.has(r.name) ? "its address stays allocated" : verdicts.reservation(r)
    if (verdict !== undefined) kept.push(keptReservation(r, verdict))
    else reservations.push(r)
  }
  return { holding, trigger: why?.reason ?? holding.trigger, decision: entries.length + reservations.length > 0 ? "release" : "kept", entries, reservations, kept }
}

const FREE_ALL = { entry: () => undefined, reservation: () => undefined }

/** Everything of a pod that will never run again (or is gone); forced: an operator's --force. */
const releaseAll = (holding: Holding, live: PodProjection | undefined, why?: NeverRunsAgain, forced = false): OwnerPlan =>
  planWith(holding, live, FREE_ALL, why, forced)

/** A pod seen to never run again: freed only if the live pod is that incarnation and still never runs again. */
const planNeverRunsAgain = (holding: Holding, live: PodProjection | undefined, facts: LivenessFacts): OwnerPlan => {
  if (live === undefined) return releaseAll(holding, live)
  if (live.uid !== holding.pod?.uid) return keptAll(holding, `pod ${holding.podref} exists again (uid ${live.uid}) and holds these addresses`)
  const why = facts.neverRunsAgain?.(live)
  return why === undefined ? keptAll(holding, `pod ${holding.podref} may run again`) : releaseAll(holding, live, why)
}

/** Named by an operator: free while no pod of the name exists or the one there never runs again; forced, whatever the pod. */
const planOperator = (holding: Holding, live: PodProjection | undefined, facts: LivenessFacts): OwnerPlan => {
  if (live === undefined) return releaseAll(holding, live)
  const why = facts.neverRunsAgain?.(live)
  if (why !== undefined) return releaseAll(holding, live, why)
  if (holding.operator?.force === true) return releaseAll(holding, live, undefined, true)
  return keptAll(holding, `pod ${holding.podref} exists (uid ${live.uid}) and may run: refused (--force frees it anyway)`)
}

const planByClaim = (holding: Holding, live: PodProjection | undefined, facts: LivenessFacts): OwnerPlan => {
  if (holding.error !== undefined) return emptyPlan(holding, "failed")
  if (holding.entries.length === 0 && holding.reservations.length === 0) return emptyPlan(holding, "nothing")
  if (holding.claim === "Deleted" && live !== undefined) return keptAll(holding, `pod ${holding.podref} exists again${live.uid === "" ? "" : ` (uid ${live.uid})`} and holds these addresses`)
  if (holding.claim === "NeverRunsAgain") return planNeverRunsAgain(holding, live, facts)
  if (holding.claim === "Operator") return planOperator(holding, live, facts)
  return planWith(holding, live, {
    entry: (held) => entryVerdict(live, held.entry.ip, held.entry.ifname),
    reservation: (r) => reservationVerdict(live, r)
  })
}

/** Upstream's Normal Event; for a pod that still exists why its address went, for an operator's release that it was one. */
const gcEvent = (regarding: EventIntent["regarding"], held: HeldEntry, detail: string | undefined, note: string | undefined): EventIntent => {
  const notes = [detail, note].filter((n) => n !== undefined)
  return {
    regarding,
    type: "Normal",
    reason: REASON_GARBAGE_COLLECTED,
    message: `${garbageCollectedMessage(formatIP(held.entry.ip), held.network)}${notes.length === 0 ? "" : ` (${notes.join("; ")})`}`
  }
}

/**
 * The first claimant whose live pod still lists one of `ips`, and that address: whom it is held
 * for (rule 0). A claimant that will never run again (rule 7, on the same live facts) holds nothing.
 */
const heldFor = (claimants: ReadonlyArray<string> | undefined, ips: ReadonlyArray<IPAddress>, facts: LivenessFacts): { readonly pod: PodProjection; readonly ip: IPAddress } | undefined => {
  const ended = (pod: PodProjection) => facts.neverRunsAgain?.(pod) !== undefined
  for (const ref of claimants ?? []) {
    const pod = facts.live.get(ref)
    const ip = ips.find((a) => stillClaims(pod, a, ended))
    if (pod !== undefined && ip !== undefined) return { pod, ip }
  }
  return undefined
}

const keptFor = (k: Kept, by: { readonly pod: PodProjection; readonly ip: IPAddress }): Kept => ({
  ...k,
  why: `held for another: pod ${podRef(by.pod)} (uid ${by.pod.uid}) lists ${formatIP(by.ip)} in the same network`,
  heldFor: podRef(by.pod)
})

/** Rule 0 over a plan: what another live pod lists stays, with the reservation of its address. */
const keepForOthers = (plan: OwnerPlan, facts: LivenessFacts): OwnerPlan => {
  if (plan.decision !== "release" || plan.holding.operator?.force === true) return plan
  const kept: Array<Kept> = [...plan.kept]
  const entries = plan.entries.filter((p) => {
    const by = heldFor(p.held.claimants, [p.held.entry.ip], facts)
    if (by !== undefined) kept.push(keptFor(keptEntry(p.held, ""), by))
    return by === undefined
  })
  const stays = reservationsOf(plan.entries.filter((p) => !entries.includes(p)).map((p) => p.held))
  const reservations = plan.reservations.filter((r) => {
    const by = heldFor(r.claimants, reservationIPs(r.name, heldReservationIP(r, plan.holding.entries)), facts)
    if (by !== undefined) kept.push(keptFor(keptReservation(r, ""), by))
    else if (stays.has(r.name)) kept.push(keptReservation(r, "its address stays allocated"))
    return by === undefined && !stays.has(r.name)
  })
  if (kept.length === plan.kept.length) return plan
  return { ...plan, decision: entries.length + reservations.length > 0 ? "release" : "kept", entries, reservations, kept }
}

/** Plans the release of every holding against what the live re-check found; an operator's counts under trigger "operator". */
export const planRelease = (holdings: ReadonlyArray<Holding>, facts: LivenessFacts): ReleasePlan => ({
  owners: holdings.map((h) => {
    const plan = planByClaim(h, facts.live.get(h.podref), facts)
    return keepForOthers(h.operator === undefined ? plan : { ...plan, trigger: "operator" }, facts)
  })
})

/** The plan's entries per pool (one guarded patch each), in the order pools first appear. */
export const entriesByPool = (entries: Iterable<PlannedEntry>): ReadonlyMap<string, ReadonlyArray<PlannedEntry>> => Map.groupBy(entries, (e) => e.held.pool)

/** An address the executor freed; `network` is what its Event names. */
export interface FreedIP {
  readonly ip: string
  readonly pool: string
  readonly network: string
}

/** How a candidate ended. */
export type Outcome = Data.TaggedEnum<{
  /** Everything planned went through (an entry changed under us counts as done: it is not the dead pod's any more). */
  Freed: { readonly freed: ReadonlyArray<FreedIP>; readonly reservations: number }
  /** Some of it was freed, then a write failed: the rest is retried. */
  PartlyFreed: { readonly freed: ReadonlyArray<FreedIP>; readonly reservations: number; readonly error: ReleaseError }
  /** A live pod holds it. */
  Kept: { readonly why: string }
  Failed: { readonly error: ReleaseError }
}>
export const Outcome = Data.taggedEnum<Outcome>()

/** What the work queue does with a candidate after its outcome. */
export type NextStep =
  | { readonly _tag: "Forget" }
  | { readonly _tag: "LookAgain" }
  | { readonly _tag: "Requeue"; readonly error: ReleaseError }
  | { readonly _tag: "GiveUp"; readonly error: ReleaseError }
  | { readonly _tag: "Drop"; readonly error: ReleaseError }

/**
 * Done, retried while attempts remain (a retryable error), given up (retries spent), or dropped
 * (bad input: retrying cannot help until the object changes). A deleted pod freed of all the
 * snapshot showed but `unseen` on a network (holdings.ts) is looked at once more later.
 */
export const nextStep = (outcome: Outcome, attempt: number, maxAttempts: number, unseen = false): NextStep => {
  if (outcome._tag === "Freed") return unseen ? { _tag: "LookAgain" } : { _tag: "Forget" }
  if (outcome._tag === "Kept") return { _tag: "Forget" }
  const { error } = outcome
  if (!error.retryable) return { _tag: "Drop", error }
  return attempt < maxAttempts ? { _tag: "Requeue", error } : { _tag: "GiveUp", error }
}
