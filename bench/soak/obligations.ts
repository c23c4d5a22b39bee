/**
 * What must be freed, and by when. Once a pod is gone or will never run again, everything then
 * held for it becomes an obligation with a clock, met when each item is removed or taken over by a
 * new incarnation (a StatefulSet pod's ADD rewrites the container id); the time to meet it is a
 * delete → free sample. It is overdue `boundMs` after its clock started, pushed past fault windows
 * that begin before that deadline. While a namesake exists but does not run yet the clock stands
 * still: nothing of a name that has a pod may be freed.
 */
import { type Attached, type PodView, type PoolView, type ReservationView, isLiveRunning } from "./invariants.ts"

export type Why = "deleted" | "Succeeded" | "Failed" | "evicted" | "node gone" | "out of service"

export interface Item {
  readonly kind: "entry" | "reservation"
  /** Pool name, or reservation name. */
  readonly object: string
  readonly network: string
  readonly ip: string
}

export const itemKey = (i: Item): string => `${i.kind} ${i.object} ${i.ip}`

export interface Obligation {
  readonly ref: string
  readonly uid: string
  readonly why: Why
  /** When the pod was deleted / qualified (ms since the epoch): latency counts from here. */
  readonly started: number
  /** When the clock last (re)started. */
  since: number
  readonly items: Map<string, Item>
  /** Items a new incarnation took over (not frees). */
  claimed: number
}

export interface Sample {
  readonly ref: string
  readonly why: Why
  readonly started: number
  readonly freedAt: number
  readonly latencyMs: number
}

export interface Window {
  readonly start: number
  /** Undefined while the fault lasts. */
  readonly end: number | undefined
}

/** `since + bound`, pushed past each fault window that starts before the deadline reached so far. */
export const deadlineOf = (since: number, boundMs: number, windows: ReadonlyArray<Window>): number => {
  let deadline = since + boundMs
  for (const w of [...windows].sort((a, b) => a.start - b.start)) {
    if (w.start > deadline) break
    deadline = Math.max(deadline, (w.end ?? Number.POSITIVE_INFINITY) + boundMs)
  }
  return deadline
}

export const makeObligations = (boundMs: number, windows: () => ReadonlyArray<Window>) => {
  const open = new Map<string, Obligation>()
  const byRef = new Map<string, Set<Obligation>>()
  const samples: Array<Sample> = []
  /** Closes the obligation once nothing is left of it. */
  const finish = (o: Obligation, at: number) => {
    if (o.items.size > 0) return
    open.delete(`${o.ref} ${o.uid}`)
    byRef.get(o.ref)?.delete(o)
    // An address a new incarnation took over was never freed: no latency to report.
    if (o.claimed === 0) samples.push({ ref: o.ref, why: o.why, started: o.started, freedAt: at, latencyMs: at - o.started })
  }
  const touching = (ref: string, item: Item, at: number, claimed: boolean) => {
    for (const o of [...(byRef.get(ref) ?? [])]) {
      if (!o.items.delete(itemKey(item))) continue
      if (claimed) o.claimed++
      finish(o, at)
    }
  }
  return {
    open: (ref: string, uid: string, why: Why, at: number, items: ReadonlyArray<Item>): Obligation | undefined => {
      const id = `${ref} ${uid}`
      if (open.has(id) || items.length === 0) return undefined
      const o: Obligation = { ref, uid, why, started: at, since: at, items: new Map(items.map((i) => [itemKey(i), i])), claimed: 0 }
      open.set(id, o)
      let set = byRef.get(ref)
      if (set === undefined) byRef.set(ref, (set = new Set()))
      set.add(o)
      return o
    },
    /** An item was removed at `at`. */
    removed: (ref: string, item: Item, at: number) => touching(ref, item, at, false),
    /** An entry of `ref` now carries another container id: a new incarnation's ADD took it over. */
    claimed: (ref: string, item: Item) => touching(ref, item, Date.now(), true),
    /**
     * Once per evaluation: stops the clock of obligations whose name has a pod that does not run
     * yet, drops items a running namesake lists, and returns the overdue ones.
     */
    overdue: (now: number, namesake: (ref: string) => { readonly pod: PodView; readonly attached: ReadonlyArray<Attached> | undefined } | undefined): ReadonlyArray<Obligation> => {
      const late: Array<Obligation> = []
      for (const o of open.values()) {
        const other = namesake(o.ref)
        if (other !== undefined && other.pod.uid !== o.uid) {
          if (!isLiveRunning(other.pod) || other.attached === undefined) {
            o.since = now
            continue
          }
          for (const [k, item] of o.items) {
            if (other.attached.some((a) => a.network === item.network && a.ips.includes(item.ip))) {
              o.items.delete(k)
              o.claimed++
            }
          }
          finish(o, now)
          if (o.items.size === 0) continue
        }
        if (now > deadlineOf(o.since, boundMs, windows())) late.push(o)
      }
      return late
    },
    samples: () => samples,
    has: (ref: string, uid: string) => open.has(`${ref} ${uid}`)
  }
}

/** The items of `ref` in a view: its pool entries and reservations. */
export const itemsOf = (ref: string, pools: Iterable<PoolView>, reservations: Iterable<readonly [string, ReservationView]>): ReadonlyArray<Item> => {
  const out: Array<Item> = []
  for (const p of pools) for (const e of p.entries.values()) if (e.podref === ref) out.push({ kind: "entry", object: e.pool, network: e.network, ip: e.ip })
  for (const [name, r] of reservations) if (r.podref === ref) out.push({ kind: "reservation", object: name, network: r.network, ip: r.ip })
  return out
}
