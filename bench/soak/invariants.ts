/**
 * The soak's invariants over one view of the cluster (watch caches, or fresh lists), as pure
 * functions: every address a running pod's status lists is held for it in its network's pools and
 * reserved; no address is held twice in a network. This is the checker's own reading, on purpose
 * not src/domain/invariants.ts: a judge that shares the controller's definitions shares their
 * mistakes. The two must agree instead (main.ts, checkControllerGauges).
 */
import { addOffset, cidrAddress, formatIP, parseCidr, parseIP } from "../../src/domain/ip.ts"
import { parseReservationName, reservationName } from "../../src/domain/pool.ts"
import { ALL_NETS, netByKey, networkOfPool } from "./networks.ts"

export interface PodView {
  /** `ns/name` */
  readonly ref: string
  readonly uid: string
  readonly phase: string
  readonly node: string
  /** deletionTimestamp (ms since the epoch) when terminating */
  readonly deletionAt: number | undefined
  /** A DisruptionTarget condition with reason DeletionByTaintManager. */
  readonly evictedByTaintManager: boolean
  /** The raw network-status annotation. */
  readonly status: string | undefined
}

export interface Entry {
  readonly pool: string
  readonly network: string
  readonly ip: string
  readonly podref: string
  readonly id: string
}

export interface PoolView {
  readonly name: string
  readonly network: string
  /** By IP text (canonical). */
  readonly entries: ReadonlyMap<string, Entry>
}

/** Canonical text of an address (RFC 5952 for IPv6), so the pool's and the status's spellings compare. */
export const canonicalIP = (text: string): string => {
  const ip = parseIP(text)
  return ip === undefined ? text : formatIP(ip)
}

/** A pool object as the checker sees it; entries whose offsets do not parse are left out (the controller must leave them too). */
export const poolView = (o: { metadata: { name: string }; spec?: { range?: string; allocations?: Record<string, { id?: string; podref?: string }> } }): PoolView => {
  const name = o.metadata.name
  const network = networkOfPool(name)
  const entries = new Map<string, Entry>()
  const cidr = parseCidr(o.spec?.range ?? "")
  if (cidr !== undefined) {
    for (const [key, a] of Object.entries(o.spec?.allocations ?? {})) {
      if (!/^(0|[1-9][0-9]*)$/.test(key) || typeof a?.podref !== "string") continue
      const ip = addOffset(cidrAddress(cidr), BigInt(key))
      if (ip !== undefined) entries.set(formatIP(ip), { pool: name, network, ip: formatIP(ip), podref: a.podref, id: String(a.id ?? "") })
    }
  }
  return { name, network, entries }
}

export type ReservationView = Pick<Entry, "podref" | "network" | "ip">

const KNOWN_NETWORKS = new Set(ALL_NETS.map((n) => n.networkName))

/** A reservation object as the checker sees it: its name, and the network and address its name spells. */
export const reservationView = (o: Record<string, unknown>): [string, ReservationView] => {
  const name = (o["metadata"] as { name: string }).name
  const candidates = parseReservationName(name)
  const hit = candidates.find((c) => c.networkName !== "" && KNOWN_NETWORKS.has(c.networkName)) ?? candidates.find((c) => c.networkName === "")
  return [name, { podref: String((o["spec"] as { podref?: unknown } | undefined)?.podref ?? ""), network: hit?.networkName ?? "?", ip: hit === undefined ? name : formatIP(hit.ip) }]
}

export interface Attached {
  /** The NAD's `ns/name`. */
  readonly net: string
  readonly network: string
  readonly ips: ReadonlyArray<string>
}

/** The secondary networks and addresses a network-status lists; undefined when it cannot be read. */
export const statusAddresses = (status: string | undefined): ReadonlyArray<Attached> | undefined => {
  if (status === undefined) return []
  let parsed: unknown
  try {
    parsed = JSON.parse(status)
  } catch {
    return undefined
  }
  if (!Array.isArray(parsed)) return undefined
  const out: Array<Attached> = []
  for (const e of parsed as Array<{ name?: unknown; ips?: unknown; default?: unknown }>) {
    if (typeof e !== "object" || e === null || typeof e.name !== "string") return undefined
    if (e.default === true) continue
    const net = netByKey(e.name)
    if (net === undefined || !Array.isArray(e.ips)) continue
    out.push({ net: e.name, network: net.networkName, ips: e.ips.filter((i): i is string => typeof i === "string").map(canonicalIP) })
  }
  return out
}

export const isLiveRunning = (p: PodView): boolean => p.deletionAt === undefined && p.phase === "Running"

/**
 * A pod must hold its addresses while it runs, and while it terminates without qualifying as never
 * running again (`qualifiesAt`), unless the kubelet has begun its CNI DEL: a partitioned node may
 * still run it.
 */
export const mustHold = (p: PodView, now: number, qualifiesAt: (p: PodView) => number | undefined, delStarted: (uid: string) => boolean): boolean => {
  if (isLiveRunning(p)) return true
  if (p.deletionAt === undefined || p.phase !== "Running" || delStarted(p.uid)) return false
  const at = qualifiesAt(p)
  return at === undefined || at > now
}

export interface Problem {
  readonly kind: "live-not-held" | "reservation-missing" | "held-twice"
  /** Stable identity of the problem, to tell a persisting one from a new one. */
  readonly id: string
  readonly pods: ReadonlyArray<string>
  readonly network: string
  readonly ip: string
  readonly detail: string
}

/**
 * The problems of one view. `known` gives the addresses the harness's kubelet got from the plugin
 * for a pod whose status it overwrote with something unreadable (it still runs on them). Entries
 * count as holding an address twice only when at least two of their pods exist: an entry left by
 * a pod that is gone is the bound's business (an overlapping range may hand out its address once
 * the reservation is gone), not a second holder.
 */
export const problemsOf = (view: {
  /** Every pod that exists (of the names read). */
  readonly pods: ReadonlyArray<PodView>
  readonly pools: Iterable<PoolView>
  readonly reservations: ReadonlyMap<string, ReservationView>
  readonly known: (pod: PodView) => ReadonlyArray<Attached> | undefined
  /** The pods whose addresses must be held (default: those running and not deleted). */
  readonly mustHold?: (pod: PodView) => boolean
}): ReadonlyArray<Problem> => {
  const present = new Set(view.pods.map((p) => p.ref))
  const exists = (ref: string) => present.has(ref)
  // `network ip` → the entries holding it, across every pool of that network.
  const holders = Map.groupBy([...view.pools].flatMap((pool) => [...pool.entries.values()]), (e) => `${e.network} ${e.ip}`)
  const out: Array<Problem> = []
  const listedBy = new Map<string, string>()
  for (const pod of view.pods) {
    if (!(view.mustHold ?? isLiveRunning)(pod)) continue
    const attached = statusAddresses(pod.status) ?? view.known(pod) ?? []
    for (const a of attached) {
      for (const ip of a.ips) {
        const k = `${a.network} ${ip}`
        const other = listedBy.get(k)
        if (other !== undefined && other !== pod.ref) out.push({ kind: "held-twice", id: `listed ${k}`, pods: [other, pod.ref], network: a.network, ip, detail: `two live pods list ${ip}: ${other} and ${pod.ref}` })
        listedBy.set(k, pod.ref)
        const held = holders.get(k) ?? []
        if (!held.some((e) => e.podref === pod.ref)) {
          out.push({ kind: "live-not-held", id: `${pod.ref} ${pod.uid} ${k}`, pods: [pod.ref], network: a.network, ip, detail: `${pod.ref} runs on ${ip} (${a.net}) but ${held.length === 0 ? "no pool holds it" : `the pool holds it for ${held.map((e) => e.podref).join(", ")}`}` })
        }
        const parsed = parseIP(ip)
        const rname = parsed === undefined ? ip : reservationName(parsed, a.network)
        const owner = view.reservations.get(rname)?.podref
        if (owner !== pod.ref) {
          out.push({ kind: "reservation-missing", id: `${pod.ref} ${pod.uid} res ${rname}`, pods: [pod.ref], network: a.network, ip, detail: `${pod.ref} runs on ${ip} but reservation ${rname} ${owner === undefined ? "does not exist" : `names ${owner}`}` })
        }
      }
    }
  }
  for (const [k, entries] of holders) {
    const refs = [...new Set(entries.map((e) => e.podref))].filter(exists)
    if (refs.length > 1) {
      const [network, ip] = [k.slice(0, k.indexOf(" ")), k.slice(k.indexOf(" ") + 1)]
      out.push({ kind: "held-twice", id: `pools ${k}`, pods: refs, network, ip, detail: `${ip} is held in ${entries.filter((e) => exists(e.podref)).map((e) => `${e.pool} for ${e.podref}`).join(" and in ")}` })
    }
  }
  return out
}

export interface Interval {
  readonly who: string
  readonly from: number
  readonly to: number
}

/** Pairs of intervals of different holders that overlap. */
export const overlapping = (intervals: ReadonlyArray<Interval>): ReadonlyArray<readonly [Interval, Interval]> => {
  const out: Array<readonly [Interval, Interval]> = []
  const sorted = [...intervals].sort((a, b) => a.from - b.from)
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length && sorted[j]!.from < sorted[i]!.to; j++) {
      const [a, b] = [sorted[i]!, sorted[j]!]
      if (a.who !== b.who && Math.min(a.to, b.to) - b.from > 0) out.push([a, b])
    }
  }
  return out
}
