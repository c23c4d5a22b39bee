/**
 * The invariant checker: its own watches (watch.ts) keep a view of the cluster and each object's
 * history, on which the invariants and obligations are evaluated every two seconds; a problem seen
 * twice, three seconds apart, counts only once fresh reads confirm it (a lagging watch is never a
 * violation). At rest everything is read fresh.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { Duration } from "effect"
import { OPTIONS } from "../../src/services/ControllerConfig.ts"
import { type Credentials, rest } from "../../test/live/support/rest.ts"
import { addressKey, type History } from "./history.ts"
import { type Attached, type Entry, isLiveRunning, mustHold, type PodView, type PoolView, poolView, type Problem, problemsOf, type ReservationView, reservationView, statusAddresses } from "./invariants.ts"
import { type Item, itemKey, itemsOf, makeObligations, type Obligation, type Window, type Why } from "./obligations.ts"
import { NAMESPACES, POOLS_NAMESPACE } from "./networks.ts"
import { type Change, startWatcher } from "./watch.ts"

export interface Violation {
  readonly kind: string
  readonly id: string
  /** ms since the start of the run */
  readonly t: number
  readonly summary: string
  /** Keys of the objects involved, for their history. */
  readonly keys: ReadonlyArray<string>
  readonly history: ReadonlyArray<string>
  readonly controllerLog: ReadonlyArray<string>
}

interface CheckerDeps {
  readonly creds: Credentials
  readonly history: History
  readonly boundMs: number
  readonly windows: () => ReadonlyArray<Window>
  /** What the harness's kubelet got from the plugin for this pod incarnation (its real addresses). */
  readonly known: (pod: PodView) => ReadonlyArray<Attached> | undefined
  /** Whether the harness's kubelet has begun this incarnation's CNI DEL. */
  readonly delStarted: (uid: string) => boolean
  /** When the harness's final delete of this incarnation answered. */
  readonly deletedAt: (uid: string) => number | undefined
  /** Controller log lines mentioning a text. */
  readonly grep: (text: string) => ReadonlyArray<string>
}

const TERMINATING_GRACE_MS = Duration.toMillis(OPTIONS.terminatingGrace.default)
const POOLS_PATH = `/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/${POOLS_NAMESPACE}`
const SOAK_PODS = "/api/v1/pods?labelSelector=soak%3D1"

const podViewOf = (o: Record<string, unknown>): PodView => {
  const meta = o["metadata"] as { namespace: string; name: string; uid: string; deletionTimestamp?: string; annotations?: Record<string, string> }
  const status = (o["status"] ?? {}) as { phase?: string; conditions?: Array<{ type?: string; reason?: string; status?: string }> }
  return {
    ref: `${meta.namespace}/${meta.name}`,
    uid: meta.uid,
    phase: status.phase ?? "",
    node: String((o["spec"] as { nodeName?: string } | undefined)?.nodeName ?? ""),
    deletionAt: meta.deletionTimestamp === undefined ? undefined : Date.parse(meta.deletionTimestamp),
    evictedByTaintManager: (status.conditions ?? []).some((c) => c.type === "DisruptionTarget" && c.reason === "DeletionByTaintManager" && c.status === "True"),
    status: meta.annotations?.["k8s.v1.cni.cncf.io/network-status"]
  }
}

const describePod = (p: PodView) =>
  `uid=${p.uid.slice(0, 8)} phase=${p.phase || "-"} node=${p.node}${p.deletionAt === undefined ? "" : " terminating"}${p.evictedByTaintManager ? " evicted-by-taint-manager" : ""}${p.status === undefined ? "" : ` status=${(statusAddresses(p.status) ?? [{ net: "(unreadable)", ips: [] }]).map((a) => `${a.net}:${a.ips.join(",")}`).join(" ")}`}`

export const startChecker = (deps: CheckerDeps) => {
  const pods = new Map<string, PodView>()
  const pools = new Map<string, PoolView>()
  const reservations = new Map<string, ReservationView>()
  /** Nodes by name: since when tainted out of service (undefined: not). */
  const nodes = new Map<string, number | undefined>()
  const goneNodes = new Map<string, number>()
  const warnings: Array<{ t: number; text: string }> = []
  const eventReasons = new Map<string, number>()
  const leaseHolders: Array<{ t: number; holder: string }> = []
  const obligations = makeObligations(deps.boundMs, deps.windows)
  const violations: Array<Violation> = []
  const reported = new Set<string>()
  const suspects = new Map<string, { first: number; seen: number }>()
  const h = deps.history

  /**
   * When a pod that still exists qualifies as never running again (ms since the epoch), by the
   * checker's own reading of the README's rule: finished; terminating with the taint manager's mark;
   * terminating past its grace period plus --terminating-grace on a node that is gone or tainted out
   * of service (the NotReady rule is off, as by default).
   */
  const qualifies = (p: PodView, seenAt: number): { readonly why: Why; readonly at: number } | undefined => {
    if (p.phase === "Succeeded" || p.phase === "Failed") return { why: p.phase, at: seenAt }
    if (p.deletionAt === undefined) return undefined
    if (p.evictedByTaintManager) return { why: "evicted", at: seenAt }
    const grace = p.deletionAt + TERMINATING_GRACE_MS
    const gone = goneNodes.get(p.node)
    if (gone !== undefined && !nodes.has(p.node)) return { why: "node gone", at: Math.max(gone, grace) }
    const oos = nodes.get(p.node)
    if (oos !== undefined) return { why: "out of service", at: Math.max(oos, grace) }
    return undefined
  }

  const open = (pod: PodView, why: Why, at: number) => {
    const o = obligations.open(pod.ref, pod.uid, why, at, itemsOf(pod.ref, pools.values(), reservations))
    if (o !== undefined) h.add([pod.ref], `checker: ${pod.ref} ${why}: ${o.items.size} item(s) to free: ${[...o.items.values()].map((i) => `${i.kind} ${i.ip}`).join(", ")}`)
  }

  const timers = new Map<string, NodeJS.Timeout>()
  /** Opens the obligation of a pod that qualifies as never running again, at the moment it qualifies. */
  const watchQualification = (p: PodView, seenAt: number) => {
    if (obligations.has(p.ref, p.uid) || timers.has(p.uid)) return
    const q = qualifies(p, seenAt)
    if (q === undefined) return
    const wait = q.at - Date.now()
    if (wait <= 0) return open(p, q.why, q.at)
    timers.set(
      p.uid,
      setTimeout(() => {
        timers.delete(p.uid)
        const current = pods.get(p.ref)
        if (current?.uid === p.uid) watchQualification(current, Date.now())
      }, wait + 1).unref()
    )
  }

  const onPod = (c: Change) => {
    const next = podViewOf(c.object)
    const before = pods.get(c.key)
    if (c.type === "DELETED" || (before !== undefined && before.uid !== next.uid)) {
      if (before !== undefined) {
        pods.delete(c.key)
        h.add([c.key], `watch: pod ${c.key} DELETED${c.relist ? " (seen by a relist)" : ""} uid=${before.uid.slice(0, 8)}`, c.at)
        if (!obligations.has(before.ref, before.uid)) open(before, "deleted", Math.min(c.at, deps.deletedAt(before.uid) ?? c.at))
      }
      if (c.type === "DELETED") return
    }
    pods.set(c.key, next)
    watchQualification(next, c.at)
    const line = describePod(next)
    if (before === undefined || describePod(before) !== line) h.add([c.key], `watch: pod ${c.key} ${c.type}${c.relist ? " (relist)" : ""} ${line}`, c.at)
  }

  const onPool = (c: Change) => {
    const before = pools.get(c.key.split("/").pop()!)
    const next = c.type === "DELETED" ? undefined : poolView(c.object as never)
    const name = (c.object["metadata"] as { name: string }).name
    if (next === undefined) pools.delete(name)
    else pools.set(name, next)
    const old = before?.entries ?? new Map<string, Entry>()
    const now = next?.entries ?? new Map<string, Entry>()
    for (const [ip, e] of old) {
      const n = now.get(ip)
      if (n !== undefined && n.podref === e.podref && n.id === e.id) continue
      const item: Item = { kind: "entry", object: name, network: e.network, ip }
      if (n !== undefined && n.podref === e.podref) {
        h.add([e.podref, addressKey(e.network, ip)], `watch: pool ${name} ${ip} ${e.podref} container ${e.id.slice(0, 12)} → ${n.id.slice(0, 12)}`, c.at)
        obligations.claimed(e.podref, item)
        continue
      }
      h.add([e.podref, addressKey(e.network, ip)], `watch: pool ${name} − ${ip} (was ${e.podref}, container ${e.id.slice(0, 12)})${c.relist ? " (relist)" : ""}`, c.at)
      obligations.removed(e.podref, item, c.at)
    }
    for (const [ip, n] of now) {
      const e = old.get(ip)
      if (e !== undefined && e.podref === n.podref) continue
      h.add([n.podref, addressKey(n.network, ip)], `watch: pool ${name} + ${ip} for ${n.podref} (container ${n.id.slice(0, 12)})${c.relist ? " (relist)" : ""}`, c.at)
    }
  }

  const onReservation = (c: Change) => {
    const [name, r] = reservationView(c.object)
    const before = reservations.get(name)
    const deleted = c.type === "DELETED"
    if (deleted) reservations.delete(name)
    else reservations.set(name, r)
    if (!deleted && before?.podref === r.podref) return
    if (!deleted) h.add([r.podref, addressKey(r.network, r.ip)], `watch: reservation ${name} for ${r.podref}${c.relist ? " (relist)" : ""}`, c.at)
    if (before === undefined) return
    if (deleted) h.add([before.podref, addressKey(before.network, before.ip)], `watch: reservation ${name} deleted (was ${before.podref})${c.relist ? " (relist)" : ""}`, c.at)
    obligations.removed(before.podref, { kind: "reservation", object: name, network: before.network, ip: before.ip }, c.at)
  }

  const onNode = (c: Change) => {
    const name = (c.object["metadata"] as { name: string }).name
    if (c.type === "DELETED") {
      nodes.delete(name)
      goneNodes.set(name, c.at)
      h.add([`node ${name}`], `watch: node ${name} deleted`, c.at)
      requalifyNode(name, c.at)
      return
    }
    const taints = ((c.object["spec"] as { taints?: Array<{ key: string }> } | undefined)?.taints ?? []).map((t) => t.key)
    const oos = taints.includes("node.kubernetes.io/out-of-service")
    nodes.set(name, oos ? (nodes.get(name) ?? c.at) : undefined)
    h.add([`node ${name}`], `watch: node ${name} ${c.type} taints=[${taints.join(",")}]`, c.at)
    requalifyNode(name, c.at)
  }

  /** A node's change may make its terminating pods qualify. */
  const requalifyNode = (name: string, at: number) => {
    for (const p of pods.values()) if (p.node === name) watchQualification(p, at)
  }

  const onEvent = (c: Change) => {
    if (c.type === "DELETED") return
    const e = c.object as { type?: string; reason?: string; message?: string; count?: number; involvedObject?: { namespace?: string; name?: string; kind?: string }; reportingInstance?: string }
    const k = `${e.type} ${e.reason}`
    if (c.type === "ADDED") eventReasons.set(k, (eventReasons.get(k) ?? 0) + 1)
    if (e.type === "Warning" && c.type === "ADDED") {
      const ref = `${e.involvedObject?.namespace ?? ""}/${e.involvedObject?.name ?? ""}`
      warnings.push({ t: c.at, text: `${e.reason} ${e.involvedObject?.kind} ${ref}: ${e.message}` })
      h.add([ref], `event: Warning ${e.reason} by ${e.reportingInstance ?? "?"}: ${e.message}`, c.at)
    }
  }

  const onLease = (c: Change) => {
    const holder = c.type === "DELETED" ? "(deleted)" : String((c.object["spec"] as { holderIdentity?: string } | undefined)?.holderIdentity ?? "")
    if (leaseHolders.at(-1)?.holder === holder) return
    leaseHolders.push({ t: c.at, holder })
    h.add(["leadership", "lease"], `watch: Lease holder ${holder === "" ? "(released)" : holder}`, c.at)
  }

  const watchers = [
    startWatcher(deps.creds, SOAK_PODS, onPod),
    startWatcher(deps.creds, `${POOLS_PATH}/ippools`, onPool),
    startWatcher(deps.creds, `${POOLS_PATH}/overlappingrangeipreservations`, onReservation),
    startWatcher(deps.creds, "/api/v1/nodes", onNode),
    startWatcher(deps.creds, `/apis/coordination.k8s.io/v1/namespaces/${POOLS_NAMESPACE}/leases?fieldSelector=metadata.name%3Dwhereabouts-gc`, onLease),
    ...NAMESPACES.map((ns) => startWatcher(deps.creds, `/api/v1/namespaces/${ns}/events`, onEvent))
  ]

  const stop = () => {
    for (const w of watchers) w.stop()
    for (const t of timers.values()) clearTimeout(t)
  }
  return { pods, pools, reservations, warnings, eventReasons, leaseHolders, obligations, violations, reported, suspects, watchers, h, deps, qualifies, watchQualification, stop }
}

// The judgement of the view.
type CheckerState = ReturnType<typeof startChecker>

const CONFIRM_AFTER_MS = 3_000

const getJson = async (s: CheckerState, path: string): Promise<{ status: number; body: Record<string, unknown> }> => {
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await rest(s.deps.creds, "GET", path)
      if (res.status < 500 || attempt >= 30) return { status: res.status, body: res.body === "" ? {} : (JSON.parse(res.body) as Record<string, unknown>) }
    } catch (e) {
      if (attempt >= 30) throw e
    }
    await sleep(1_000)
  }
}

const items = (body: Record<string, unknown>) => (body["items"] ?? []) as Array<Record<string, unknown>>

/** Pools and reservations listed now, then the pods named (all soak pods when `refs` is undefined). */
const readFresh = async (s: CheckerState, refs?: ReadonlyArray<string>) => {
  const pools = items((await getJson(s, `${POOLS_PATH}/ippools`)).body).map((o) => poolView(o as never))
  const reservations = new Map(items((await getJson(s, `${POOLS_PATH}/overlappingrangeipreservations`)).body).map(reservationView))
  let pods: Array<PodView>
  if (refs === undefined) pods = items((await getJson(s, SOAK_PODS)).body).map(podViewOf)
  else {
    pods = []
    for (const ref of refs) {
      const [ns, name] = ref.split("/") as [string, string]
      const got = await getJson(s, `/api/v1/namespaces/${ns}/pods/${name}`)
      if (got.status === 200) pods.push(podViewOf(got.body))
    }
  }
  return { pods, pools, reservations }
}

const record = (s: CheckerState, v: Omit<Violation, "t" | "history" | "controllerLog">) => {
  if (s.reported.has(v.id)) return
  s.reported.add(v.id)
  const pods = v.keys.filter((k) => k.includes("/"))
  const violation: Violation = {
    ...v,
    t: Date.now() - s.h.t0,
    history: s.h.render([...v.keys, "faults", "leadership"]),
    controllerLog: pods.flatMap((ref) => s.deps.grep(ref))
  }
  s.violations.push(violation)
  s.h.add(["violations", ...v.keys], `VIOLATION ${v.kind}: ${v.summary}`)
  process.stderr.write(`[soak] VIOLATION ${v.kind}: ${v.summary}\n`)
}

const problemKeys = (p: Problem) => [...p.pods, addressKey(p.network, p.ip)]

/** mustHold as the checker reads it: its own qualification, the harness kubelet's DELs. */
const holding = (s: CheckerState, now: number) => (p: PodView) => mustHold(p, now, (x) => s.qualifies(x, now)?.at, s.deps.delStarted)

const confirmProblem = async (s: CheckerState, p: Problem) => {
  const fresh = await readFresh(s, p.pods)
  const again = problemsOf({ ...fresh, known: s.deps.known, mustHold: holding(s, Date.now()) }).find((x) => x.id === p.id)
  if (again !== undefined) record(s, { kind: again.kind, id: again.id, summary: again.detail, keys: problemKeys(again) })
}

/** Is anything of the obligation still held, read fresh; and is no namesake about to take it back? */
const confirmOverdue = async (s: CheckerState, o: Obligation) => {
  const fresh = await readFresh(s, [o.ref])
  const namesake = fresh.pods.find((p) => p.ref === o.ref)
  if (namesake !== undefined && namesake.uid !== o.uid && !isLiveRunning(namesake)) return
  const still = new Set(itemsOf(o.ref, fresh.pools, fresh.reservations).map(itemKey))
  const held = [...o.items.values()].filter((i) => still.has(itemKey(i)))
  if (held.length === 0) return
  const seconds = ((Date.now() - o.started) / 1000).toFixed(0)
  record(s, {
    kind: "held-too-long",
    id: `overdue ${o.ref} ${o.uid}`,
    summary: `${held.map((i) => `${i.kind} ${i.object}${i.kind === "entry" ? ` ${i.ip}` : ""}`).join(", ")} still held for ${o.ref} (${o.why} ${seconds} s ago), past the bound of ${s.deps.boundMs / 1000} s`,
    keys: [o.ref, ...held.map((i) => addressKey(i.network, i.ip))]
  })
}

/** One round: qualify, find suspects, confirm the persistent ones and the overdue obligations. */
const evaluateOnce = async (s: CheckerState): Promise<void> => {
  const now = Date.now()
  for (const p of s.pods.values()) s.watchQualification(p, now)
  const problems = problemsOf({
    pods: [...s.pods.values()],
    pools: s.pools.values(),
    reservations: s.reservations,
    known: s.deps.known,
    mustHold: holding(s, now)
  })
  const current = new Set(problems.map((p) => p.id))
  for (const id of [...s.suspects.keys()]) if (!current.has(id)) s.suspects.delete(id)
  for (const p of problems) {
    if (s.reported.has(p.id)) continue
    const seen = s.suspects.get(p.id) ?? { first: now, seen: 0 }
    seen.seen++
    s.suspects.set(p.id, seen)
    if (seen.seen >= 2 && now - seen.first >= CONFIRM_AFTER_MS) await confirmProblem(s, p)
  }
  const overdue = s.obligations.overdue(now, (ref) => {
    const pod = s.pods.get(ref)
    return pod === undefined ? undefined : { pod, attached: statusAddresses(pod.status) ?? s.deps.known(pod) }
  })
  for (const o of overdue) if (!s.reported.has(`overdue ${o.ref} ${o.uid}`)) await confirmOverdue(s, o)
}

/** Evaluates every two seconds until `stopped()`. */
export const evaluateContinuously = async (s: CheckerState, stopped: () => boolean): Promise<void> => {
  while (!stopped()) {
    const started = Date.now()
    try {
      await evaluateOnce(s)
    } catch (e) {
      s.h.add(["checker"], `evaluation failed: ${e instanceof Error ? e.message : String(e)}`)
    }
    await sleep(Math.max(100, 2_000 - (Date.now() - started)))
  }
}

/** At rest, on fresh reads: the invariants, and nothing held for a pod that is gone or will never run again. */
export const checkAtRest = async (s: CheckerState): Promise<{ readonly livePods: number; readonly entries: number; readonly reservations: number }> => {
  const fresh = await readFresh(s)
  const now = Date.now()
  for (const p of problemsOf({ ...fresh, known: s.deps.known, mustHold: holding(s, now) })) {
    record(s, { kind: `${p.kind} (at rest)`, id: `rest ${p.id}`, summary: p.detail, keys: problemKeys(p) })
  }
  const byRef = new Map(fresh.pods.map((p) => [p.ref, p] as const))
  const deadOrDone = (ref: string) => {
    const p = byRef.get(ref)
    if (p === undefined) return "gone"
    const q = s.qualifies(p, now)
    return q !== undefined && q.at <= now ? q.why : undefined
  }
  let entries = 0
  for (const pool of fresh.pools) {
    for (const e of pool.entries.values()) {
      entries++
      const why = deadOrDone(e.podref)
      if (why !== undefined) record(s, { kind: "held (at rest)", id: `rest entry ${pool.name} ${e.ip}`, summary: `${pool.name} still holds ${e.ip} for ${e.podref} (${why})`, keys: [e.podref, addressKey(e.network, e.ip)] })
    }
  }
  for (const [name, { podref }] of fresh.reservations) {
    const why = deadOrDone(podref)
    if (why !== undefined) record(s, { kind: "held (at rest)", id: `rest reservation ${name}`, summary: `reservation ${name} still names ${podref} (${why})`, keys: [podref] })
  }
  return { livePods: fresh.pods.filter(isLiveRunning).length, entries, reservations: fresh.reservations.size }
}

export { record as recordViolation }
