/**
 * The checker's judgement: every two seconds on its watch view, confirmed against fresh reads
 * before a violation is recorded; and once at rest on fresh reads alone.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { rest } from "../../test/live/support/rest.ts"
import { addressKey } from "./history.ts"
import { type PodView, type Problem, isLiveRunning, poolView, problemsOf, reservationView, statusAddresses } from "./invariants.ts"
import { itemKey, itemsOf, type Obligation } from "./obligations.ts"
import { type CheckerState, POOLS_PATH, podViewOf, SOAK_PODS, type Violation } from "./checker.ts"

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

const confirmProblem = async (s: CheckerState, p: Problem) => {
  const again = problemsOf({ ...(await readFresh(s, p.pods)), known: s.known }).find((x) => x.id === p.id)
  if (again !== undefined) record(s, { kind: again.kind, id: again.id, summary: again.detail, keys: problemKeys(again) })
}

/** Is anything of the obligation still held, read fresh; and is no namesake about to take it back? */
const confirmOverdue = async (s: CheckerState, o: Obligation) => {
  const fresh = await readFresh(s, [o.ref])
  const namesake = fresh.pods.find((p) => p.ref === o.ref)
  if (namesake !== undefined && namesake.uid !== o.uid && !isLiveRunning(namesake)) return
  const still = new Set(itemsOf(o.ref, fresh.pools.flatMap((p) => [...p.entries.values()]), fresh.reservations).map(itemKey))
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
    known: s.known
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
    return pod === undefined ? undefined : { pod, attached: statusAddresses(pod.status) ?? s.known(pod) }
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
  for (const p of problemsOf({ ...fresh, known: s.known })) {
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
