/**
 * Rule 0 of the planner (release.ts, docs/rules.md): which other pods list an address in its domains.
 * Collision domains: an address in its pool, and, where overlapping ranges are on, its reservation
 * name (one network name, any pool); a named network and one with overlapping ranges off are
 * domains of their own. A listing whose network cannot be read (its NAD gone or unreadable, a
 * config no longer covering the address, the cluster's default network) counts in every domain.
 * A listing already on record as the lister's own elsewhere (its entry in another pool of the
 * network, and the reservation guarding the address naming it) does not keep another pod's entry:
 * that entry is not its record, and freeing it leaves the address reserved for the lister.
 */
import { Either } from "effect"
import { type IPAddress, cidrContains, ipKey } from "./ip.ts"
import type { IpamConfig, IpamConfigError, NadConfigResult } from "./ipam-config.ts"
import { listedIP, listsIP, statusAttachment } from "./multus.ts"
import { nodeSlicePoolName, slicePoolName } from "./node-slices.ts"
import { type NamespacedName, type PodProjection, podHoldsIP, podRef, statusEntries } from "./pod.ts"
import { parseReservationName, poolName, reservationName } from "./pool.ts"
import type { Orphans } from "./orphans.ts"
import type { HeldEntry, HeldReservation, Holding } from "./release.ts"

/** A key of a collision domain: two holders of one address conflict when they share a key. */
export type DomainKey = string

const anyKey = (ip: IPAddress): DomainKey => `ip:${ipKey(ip)}`
const poolKey = (pool: string, ip: IPAddress): DomainKey => `pool:${pool}|${ipKey(ip)}`
const reservationKey = (name: string): DomainKey => `reservation:${name}`

/** What a claim's domains are resolved with. */
export interface ClaimLookup {
  /** A NAD's decoded config; undefined when there is no such NAD. */
  readonly nad: (namespace: string, name: string) => Either.Either<NadConfigResult, IpamConfigError> | undefined
  /** The slice a NodeSlicePool gives a node, if any. */
  readonly nodeSlice: (nodeSlicePool: string, node: string) => string | undefined
}

/**
 * Where claims come from: the pods whose network-status lists an address (any network), how to
 * read their networks, and (where the source has fresh node facts) which of them will never run
 * again: those claim nothing, as their own addresses are freed by the same rule.
 */
export interface ClaimSource extends ClaimLookup {
  readonly listedBy: (ip: IPAddress) => ReadonlyArray<PodProjection>
  readonly ended?: ((pod: PodProjection) => boolean) | undefined
  /** Whether `podref`'s use of `ip` is on record outside `pool`: `reservation` names it and an entry of its own in another pool holds `ip`. */
  readonly recordedElsewhere?: ((podref: string, ip: IPAddress, reservation: string, pool: string) => boolean) | undefined
}

/** The domains of an entry of `pool` at `ip`, guarded by the reservation `reservation` where its network keeps them. */
export const entryDomains = (pool: string, ip: IPAddress, reservation: string | undefined): ReadonlyArray<DomainKey> =>
  [anyKey(ip), poolKey(pool, ip), ...(reservation === undefined ? [] : [reservationKey(reservation)])]

/** The address a reservation stands for, if known; else every reading of its name. */
export const reservationIPs = (name: string, ip: IPAddress | undefined): ReadonlyArray<IPAddress> =>
  ip === undefined ? parseReservationName(name).map((c) => c.ip) : [ip]

/** A held reservation's address: its own, else that of the entry it guards. */
export const heldReservationIP = (r: HeldReservation, entries: ReadonlyArray<HeldEntry>): IPAddress | undefined =>
  r.ip ?? entries.find((e) => e.reservation === r.name)?.entry.ip

/**
 * The pools a whereabouts config writes a pod's addresses to: the pool of its node's slice (none
 * when the node owns none), else one per range (those holding `ip`, when given).
 */
export const networkPools = (config: IpamConfig, node: string, lookup: Pick<ClaimLookup, "nodeSlice">, ip?: IPAddress): ReadonlyArray<string> => {
  if (config.nodeSliceSize === undefined) {
    return config.ranges.filter((r) => ip === undefined || cidrContains(r.cidr, ip)).map((r) => poolName(r.range, config.networkName))
  }
  const slice = lookup.nodeSlice(nodeSlicePoolName(config), node)
  return slice === undefined ? [] : [slicePoolName(slice, node, config.networkName)]
}

/**
 * Where an address a pod lists on a network lives, by its NAD's config: the pools that network
 * writes it to and the reservation guarding it (none where overlapping ranges are off); not
 * whereabouts' at all; or not known (the header's unreadable networks), counted in every domain.
 */
export type ListedIn =
  | { readonly _tag: "NotWhereabouts" }
  | { readonly _tag: "Unknown" }
  | { readonly _tag: "Network"; readonly networkName: string; readonly pools: ReadonlyArray<string>; readonly reservation: string | undefined }

const NOT_WHEREABOUTS: ListedIn = { _tag: "NotWhereabouts" }
const UNKNOWN: ListedIn = { _tag: "Unknown" }

/** Where `ip`, listed by `pod` on the network of `nad`, lives. */
export const listedIn = (pod: PodProjection, nad: NamespacedName, ip: IPAddress, lookup: ClaimLookup): ListedIn => {
  const decoded = lookup.nad(nad.namespace, nad.name)
  if (decoded === undefined) return UNKNOWN
  if (Either.isLeft(decoded)) return decoded.left.reason === "MissingIpam" ? NOT_WHEREABOUTS : UNKNOWN
  if (decoded.right._tag === "NotWhereabouts") return NOT_WHEREABOUTS
  const config = decoded.right.config
  const pools = networkPools(config, pod.nodeName ?? "", lookup, ip)
  // None: the pod's node owns no slice, or a config edited since the pod's ADD no longer names the pool the address came from.
  if (pools.length === 0) return UNKNOWN
  return { _tag: "Network", networkName: config.networkName, pools, reservation: config.enableOverlappingRanges ? reservationName(ip, config.networkName) : undefined }
}

/** The collision domains of a listed address: none outside whereabouts, every one where its network is not known. */
export const listedDomains = (where: ListedIn, ip: IPAddress): ReadonlyArray<DomainKey> =>
  where._tag === "NotWhereabouts"
    ? []
    : where._tag === "Unknown"
      ? [anyKey(ip)]
      : [...where.pools.map((p) => poolKey(p, ip)), ...(where.reservation === undefined ? [] : [reservationKey(where.reservation)])]

/** The domains in which a pod's network-status lists `ip` (none when it does not). */
export const claimDomains = (pod: PodProjection, ip: IPAddress, lookup: ClaimLookup): ReadonlyArray<DomainKey> =>
  statusEntries(pod)
    .filter((e) => listsIP(e, ip))
    .flatMap((e) => (e.default === true && !e.name.includes("/") ? [anyKey(ip)] : listedDomains(listedIn(pod, statusAttachment(e, pod.namespace), ip, lookup), ip)))

/** A pod in a phase it never leaves holds nothing (a restart is a new pod). */
const mayRun = (pod: PodProjection): boolean => pod.phase !== "Succeeded" && pod.phase !== "Failed"

/**
 * The podrefs of pods other than `exclude` that list an address of these domains: candidates for
 * rule 0, confirmed by the live re-check before anything is kept for them.
 */
export const claimantsOf = (domains: ReadonlyArray<DomainKey>, ip: IPAddress, exclude: string | undefined, source: ClaimSource): ReadonlyArray<string> => {
  const keys = new Set(domains)
  const out: Array<string> = []
  for (const pod of source.listedBy(ip)) {
    const ref = podRef(pod)
    if (ref === exclude || !mayRun(pod) || source.ended?.(pod) === true || out.includes(ref)) continue
    if (claimDomains(pod, ip, source).some((k) => keys.has(k))) out.push(ref)
  }
  return out
}

/** The podrefs listing any address a reservation can stand for, in its domains (its name, and each of those addresses). */
export const reservationClaimants = (name: string, ip: IPAddress | undefined, exclude: string | undefined, source: ClaimSource): ReadonlyArray<string> => {
  const ips = reservationIPs(name, ip)
  const domains = [reservationKey(name), ...ips.map(anyKey)]
  return [...new Set(ips.flatMap((a) => claimantsOf(domains, a, exclude, source)))]
}

/** Whether a claimant's live pod may still hold `ip` (podHoldsIP), so an entry it claims stays; one that will never run again claims nothing. */
export const stillClaims = (live: PodProjection | undefined, ip: IPAddress, ended: (pod: PodProjection) => boolean): boolean =>
  live !== undefined && mayRun(live) && !ended(live) && podHoldsIP(live, ip, undefined) !== "not-held"

/**
 * The holdings with their claimants found: per entry the other pods listing its address in its
 * domains, but for those whose use of it is on record elsewhere (the header); per reservation those
 * listing its address (its own pod too where the listing found no allocation of it: a live pod's
 * address must stay reserved).
 */
export const withClaimants = (holdings: ReadonlyArray<Holding>, source: ClaimSource): ReadonlyArray<Holding> =>
  holdings.map((h) => {
    if (h.error !== undefined) return h
    const entries = h.entries.map((e) => {
      const { reservation } = e
      const claimants = claimantsOf(entryDomains(e.pool, e.entry.ip, reservation), e.entry.ip, h.podref, source).filter(
        (c) => reservation === undefined || source.recordedElsewhere?.(c, e.entry.ip, reservation, e.pool) !== true
      )
      return claimants.length === 0 ? e : { ...e, claimants }
    })
    const reservations = h.reservations.map((r) => {
      const claimants = reservationClaimants(r.name, heldReservationIP(r, h.entries), r.orphan === "NoAllocation" ? undefined : h.podref, source)
      return claimants.length === 0 ? r : { ...r, claimants }
    })
    return { ...h, entries, reservations }
  })

/** An orphan by its own podref that another pod's status lists: kept, and reported (rule 0). */
export interface HeldForAnother {
  readonly kind: "allocation" | "reservation"
  /** The pool of an allocation, the name of a reservation. */
  readonly name: string
  readonly ip: IPAddress | undefined
  /** Whom the entry or reservation names. */
  readonly podref: string
  /** The pods whose status lists the address. */
  readonly claimants: ReadonlyArray<string>
}

/**
 * The sweep's orphans without what other pods of its listing hold (rule 0): those leave the
 * orphans and holdings for a list of their own. The listing is the live read here.
 */
export const separateHeldForAnother = (orphans: Orphans, holdings: ReadonlyArray<Holding>, source: ClaimSource) => {
  const claimed = withClaimants(holdings, source)
  const held: Array<HeldForAnother> = []
  const entryKeys = new Set<string>()
  const reservationNames = new Set<string>()
  for (const h of claimed) {
    for (const e of h.entries) {
      if (e.claimants === undefined) continue
      entryKeys.add(`${e.pool}/${e.entry.key}`)
      held.push({ kind: "allocation", name: e.pool, ip: e.entry.ip, podref: h.podref, claimants: e.claimants })
    }
    for (const r of h.reservations) {
      // The reservation of an address kept stays with it.
      const guarded = h.entries.some((e) => e.claimants !== undefined && e.reservation === r.name)
      if (r.claimants === undefined && !guarded) continue
      reservationNames.add(r.name)
      held.push({ kind: "reservation", name: r.name, ip: r.ip, podref: h.podref, claimants: r.claimants ?? h.entries.find((e) => e.reservation === r.name)?.claimants ?? [] })
    }
  }
  const rest = claimed
    .map((h) => ({ ...h, entries: h.entries.filter((e) => e.claimants === undefined), reservations: h.reservations.filter((r) => !reservationNames.has(r.name)) }))
    .filter((h) => h.entries.length + h.reservations.length > 0)
  return {
    orphans: {
      allocations: orphans.allocations.filter((o) => !entryKeys.has(`${o.pool}/${o.entry.key}`)),
      reservations: orphans.reservations.filter((o) => !reservationNames.has(o.name))
    } satisfies Orphans,
    holdings: rest,
    heldForAnother: held
  }
}

/** Every podref some holding's entry or reservation is claimed by: the pods the live re-check reads. */
export const claimantRefs = (holdings: ReadonlyArray<Holding>): ReadonlySet<string> =>
  new Set(holdings.flatMap((h) => [...h.entries.flatMap((e) => e.claimants ?? []), ...h.reservations.flatMap((r) => r.claimants ?? [])]))

/** The address keys a pod's status lists, any network: the pod cache's index for finding claimants. */
export const listedIPKeys = (pod: PodProjection): ReadonlyArray<string> =>
  [...new Set(statusEntries(pod).flatMap((e) => (e.ips ?? []).flatMap((text) => listedIP(text) ?? []).map(ipKey)))]

/** Who lists an address, over a list of pods (what the pod cache's index answers for a listing): built on first use. */
export const listedByIndex = (pods: ReadonlyArray<PodProjection>): ((ip: IPAddress) => ReadonlyArray<PodProjection>) => {
  let byIP: ReadonlyMap<string, ReadonlyArray<{ readonly key: string; readonly pod: PodProjection }>> | undefined
  return (ip) => {
    byIP ??= Map.groupBy(pods.flatMap((pod) => listedIPKeys(pod).map((key) => ({ key, pod }))), (l) => l.key)
    return byIP.get(ipKey(ip))?.map((l) => l.pod) ?? []
  }
}
