/**
 * The workload as a plan, drawn from the seed before anything runs: every pod with its networks,
 * node, start, end and how it ends; node deaths, mass deletions and NAD edits as times. The run
 * then follows the plan whatever the cluster does (an ADD that fails during a fault is retried,
 * a deletion still happens at its time), so one seed reproduces the same choices.
 *
 * Times are milliseconds from the start of the run.
 */
import { ALL_NETS, NAMESPACES, NETS, type Net, STS_NET, nodeName } from "./networks.ts"
import { type Rng, rngOf } from "./rng.ts"

export interface PlanOptions {
  readonly seed: number
  readonly durationMs: number
  /** Pods created per second (plain and Job pods; StatefulSet rebirths come on top). */
  readonly rate: number
  readonly meanLifetimeMs: number
  /** Share of deletions (and finished Jobs) the kubelet plays CNI DEL for; the rest leak. */
  readonly delShare: number
  readonly massEveryMs: number
  readonly nodeDeathEveryMs: number
  readonly nadEveryMs: number
}

/** How a pod ends: DEL then gone; gone without DEL (forced, or graceful then finalised); reborn under its name; its node dies. */
type EndHow = "del" | "leak" | "leak-graceful" | "rebirth" | "node"

export interface Attachment {
  readonly net: string
  readonly ifname: string
}

export interface PodPlan {
  readonly id: number
  readonly namespace: string
  readonly name: string
  /** plain; job (finishes, object kept a while); sts (reborn under its name); bad (unreadable `networks`, never started). */
  readonly kind: "plain" | "job" | "sts" | "bad"
  readonly nets: ReadonlyArray<Attachment>
  readonly node: string
  readonly at: number
  end: { at: number; how: EndHow }
  /** A Job pod's end: its phase, whether the kubelet ran DEL, and when the object is deleted. */
  readonly job?: { readonly phase: "Succeeded" | "Failed"; readonly del: boolean; readonly removeAt: number }
  /** Its network-status is overwritten with something unreadable at this time (it keeps running). */
  readonly malformed?: { readonly at: number; readonly variant: "not-json" | "wrong-shape" }
}

type NodeDeathVariant = "taint-manager" | "out-of-service" | "deleted"

export interface NodeDeath {
  readonly at: number
  readonly node: string
  readonly variant: NodeDeathVariant
  /** The node that joins in its place, and when. */
  readonly replacement: { readonly node: string; readonly at: number }
  readonly pods: ReadonlyArray<number>
}

type NadOp =
  | { readonly kind: "edit"; readonly at: number; readonly net: string; readonly variant: number }
  | { readonly kind: "delete"; readonly at: number; readonly net: string; readonly recreateAt: number }

/** Nodes at the start (a dead one is replaced), and StatefulSet replicas. */
const NODES = 6
const STS_REPLICAS = 6

/** Node deaths first: every pod then picks among the nodes alive when it is created. */
const planNodes = (o: PlanOptions, rng: Rng) => {
  const lives: Array<{ readonly node: string; readonly from: number; until: number }> = Array.from({ length: NODES }, (_, i) => ({ node: nodeName(i), from: 0, until: Number.POSITIVE_INFINITY }))
  const deaths: Array<Omit<NodeDeath, "pods">> = []
  let next = NODES
  let variants: Array<NodeDeathVariant> = []
  const living = (t: number) => lives.filter((l) => l.from <= t && l.until > t)
  for (let t = o.nodeDeathEveryMs * rng.between(0.6, 1.0); t < o.durationMs - 30_000; t += o.nodeDeathEveryMs * rng.between(0.8, 1.2)) {
    const alive = living(t)
    if (alive.length < 2) continue
    const victim = rng.pick(alive)
    victim.until = t
    if (variants.length === 0) variants = rng.shuffle(["taint-manager", "out-of-service", "deleted"] as const)
    const replacement = { node: nodeName(next++), at: t + 5_000 }
    lives.push({ node: replacement.node, from: replacement.at, until: Number.POSITIVE_INFINITY })
    deaths.push({ at: t, node: victim.node, variant: variants.pop()!, replacement })
  }
  return { deaths, aliveAt: (t: number) => living(t).map((l) => l.node) }
}

/** The flex network's NAD: three edits, then deleted for a while and created again (its first variant). */
const planNads = (o: PlanOptions, rng: Rng) => {
  const ops: Array<NadOp> = []
  const gone: Array<readonly [number, number]> = []
  const flex = NETS.find((n) => n.mutable === true)!
  let step = 0
  for (let t = o.nadEveryMs * rng.between(0.5, 1.0); t < o.durationMs - 30_000; t += o.nadEveryMs * rng.between(0.8, 1.2), step++) {
    if (step % 4 === 3) {
      const recreateAt = t + rng.between(30_000, 60_000)
      ops.push({ kind: "delete", at: t, net: flex.key, recreateAt })
      gone.push([t, recreateAt])
      t = recreateAt
    } else ops.push({ kind: "edit", at: t, net: flex.key, variant: (step % 4) + 1 })
  }
  const usable = (n: Net, t: number) => !(n.mutable === true && gone.some(([a, b]) => t >= a - 2_000 && t < b + 2_000))
  return { ops, usable }
}

const pickNets = (rng: Rng, t: number, usable: (n: Net, t: number) => boolean): ReadonlyArray<Attachment> => {
  const candidates = NETS.filter((n) => usable(n, t))
  const weighted = candidates.flatMap((n) => Array.from({ length: n.weight }, () => n))
  const first = rng.pick(weighted)
  if (!rng.chance(0.15)) return [{ net: first.key, ifname: "net1" }]
  const second = rng.pick(weighted.filter((n) => n !== first))
  return [
    { net: first.key, ifname: "net1" },
    { net: second.key, ifname: "net2" }
  ]
}

/** Plain, Job and never-started pods, arriving as a Poisson process at `rate`. */
const planArrivals = (o: PlanOptions, rng: Rng, aliveAt: (t: number) => ReadonlyArray<string>, usable: (n: Net, t: number) => boolean, ids: { next: number }) => {
  const pods: Array<PodPlan> = []
  for (let t = rng.exp(1000 / o.rate); t < o.durationMs; t += rng.exp(1000 / o.rate)) {
    const id = ids.next++
    const namespace = rng.pick(NAMESPACES)
    const node = rng.pick(aliveAt(t))
    const roll = rng.next()
    if (roll < 0.01) {
      pods.push({ id, namespace, name: `bad-${id}`, kind: "bad", nets: [], node, at: t, end: { at: t + 5_000 + rng.exp(10_000), how: "leak" } })
      continue
    }
    const nets = pickNets(rng, t, usable)
    if (roll < 0.11) {
      const finish = t + 2_000 + rng.exp(15_000)
      const job = { phase: rng.chance(0.8) ? ("Succeeded" as const) : ("Failed" as const), del: rng.chance(o.delShare), removeAt: finish + 5_000 + rng.exp(30_000) }
      pods.push({ id, namespace, name: `job-${id}`, kind: "job", nets, node, at: t, end: { at: finish, how: "leak" }, job })
      continue
    }
    const endAt = t + 2_000 + rng.exp(o.meanLifetimeMs)
    const how: EndHow = rng.chance(o.delShare) ? "del" : rng.chance(0.7) ? "leak" : "leak-graceful"
    const end = { at: endAt, how }
    const malformed = rng.chance(0.02) ? { at: t + (end.at - t) / 2, variant: rng.pick(["not-json", "wrong-shape"] as const) } : undefined
    pods.push({ id, namespace, name: `p-${id}`, kind: "plain", nets, node, at: t, end, ...(malformed === undefined ? {} : { malformed }) })
  }
  return pods
}

/** Replica i of the StatefulSet lives, ends (reborn at once, or deleted with DEL and then recreated), lives again. */
const planStatefulSet = (o: PlanOptions, rng: Rng, aliveAt: (t: number) => ReadonlyArray<string>, ids: { next: number }) => {
  const pods: Array<PodPlan> = []
  for (let i = 0; i < STS_REPLICAS; i++) {
    for (let t = 1_000 + i * 300; t < o.durationMs; ) {
      const endAt = t + 5_000 + rng.exp(45_000)
      const how: EndHow = rng.chance(0.7) ? "rebirth" : "del"
      pods.push({ id: ids.next++, namespace: STS_NET.namespace, name: `db-${i}`, kind: "sts", nets: [{ net: STS_NET.key, ifname: "net1" }], node: rng.pick(aliveAt(t)), at: t, end: { at: endAt, how } })
      t = endAt + (how === "rebirth" ? 0 : rng.between(500, 3_000))
    }
  }
  return pods
}

const aliveAtTime = (p: PodPlan, t: number) => p.at <= t && p.end.at > t

/** Draws the whole plan from the seed. */
export const makePlan = (o: PlanOptions) => {
  const nodes = planNodes(o, rngOf(o.seed, "nodes"))
  const nads = planNads(o, rngOf(o.seed, "nads"))
  const ids = { next: 0 }
  const pods = [...planArrivals(o, rngOf(o.seed, "pods"), nodes.aliveAt, nads.usable, ids), ...planStatefulSet(o, rngOf(o.seed, "statefulset"), nodes.aliveAt, ids)]
  const nodeDeaths: Array<NodeDeath> = nodes.deaths.map((d) => {
    const doomed = pods.filter((p) => p.node === d.node && aliveAtTime(p, d.at))
    for (const p of doomed) p.end = { at: d.at, how: "node" }
    return { ...d, pods: doomed.map((p) => p.id) }
  })
  const rng = rngOf(o.seed, "mass")
  const massDeletions: Array<{ readonly at: number; readonly pods: ReadonlyArray<number> }> = []
  for (let t = o.massEveryMs * rng.between(0.7, 1.0); t < o.durationMs - 10_000; t += o.massEveryMs * rng.between(0.8, 1.2)) {
    const candidates = pods.filter((p) => p.kind === "plain" && p.end.how !== "node" && aliveAtTime(p, t) && p.end.at > t + 2_000)
    const chosen = rng.shuffle(candidates).slice(0, Math.round(rng.between(0.5, 0.9) * candidates.length))
    for (const p of chosen) p.end = { at: t, how: "leak" }
    massDeletions.push({ at: t, pods: chosen.map((p) => p.id) })
  }
  pods.sort((a, b) => a.at - b.at || a.id - b.id)
  return { pods, initialNodes: Array.from({ length: NODES }, (_, i) => nodeName(i)), nodeDeaths, massDeletions, nadOps: nads.ops }
}

export type Plan = ReturnType<typeof makePlan>

/** Counts for the report and the log: what the plan asks for. */
export const planSummary = (plan: Plan) => {
  const by = (f: (p: PodPlan) => string) => plan.pods.reduce<Record<string, number>>((acc, p) => ((acc[f(p)] = (acc[f(p)] ?? 0) + 1), acc), {})
  return {
    pods: plan.pods.length,
    byKind: by((p) => p.kind),
    byEnd: by((p) => (p.kind === "job" ? `job ${p.job!.phase}${p.job!.del ? " + DEL" : ""}` : p.end.how)),
    malformed: plan.pods.filter((p) => p.malformed !== undefined).length,
    nodeDeaths: plan.nodeDeaths.map((d) => `${d.node} (${d.variant}, ${d.pods.length} pods)`),
    massDeletions: plan.massDeletions.map((m) => m.pods.length),
    nadOps: plan.nadOps.map((n) => n.kind).join(", "),
    networks: ALL_NETS.length
  }
}
