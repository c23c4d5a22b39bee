/**
 * Runs the plan (plan.ts) against the cluster: one fiber per pod, from its creation to its end;
 * pods of one name one after the other (a StatefulSet replica is recreated only once the old
 * object is gone); node deaths played as the node lifecycle controller, the taint manager, an
 * operator and the pod garbage collector would; NAD edits and deletions. Nothing planned after
 * the end of the run starts; pods whose end lies beyond it keep running, for the check at rest.
 */
import { Deferred, Duration, Effect, FiberId } from "effect"
import type { KubeApi } from "../../src/services/KubeApi.ts"
import type { History } from "./history.ts"
import { GRACE_SECONDS, type Kubelet, type PodRecord } from "./kubelet.ts"
import { netByKey } from "./networks.ts"
import type { NodeDeath, Plan, PodPlan } from "./plan.ts"
import { type Nodes, nadOps } from "./world.ts"

interface WorkloadDeps {
  readonly plan: Plan
  readonly t0: number
  /** Nothing planned after this (ms since the epoch) starts. */
  readonly endAt: number
  readonly kubelet: Kubelet
  readonly nodes: Nodes
  readonly history: History
}

const until = (at: number) => Effect.suspend(() => Effect.sleep(Duration.millis(Math.max(0, at - Date.now()))))

export const makeWorkload = (deps: WorkloadDeps) => {
  const { plan, t0, endAt, kubelet } = deps
  const records = new Map<number, PodRecord>()
  const byUid = new Map<string, PodRecord>()
  const delStarted = new Set<string>()
  /** Per name, the end of the latest incarnation: the next one waits for it. */
  const chains = new Map<string, Deferred.Deferred<void>>()
  /** Pods of a dying node: done once the node's story has removed them. */
  const nodeDone = new Map<number, Deferred.Deferred<void>>()

  const recordOf = (p: PodPlan): PodRecord => {
    const rec: PodRecord = { plan: p, ref: `${p.namespace}/${p.name}`, uid: undefined, attached: [], containerId: undefined, state: "planned", started: Deferred.unsafeMake(FiberId.none), addFailures: 0, deletedAt: undefined, createdAt: undefined, runningAt: undefined }
    records.set(p.id, rec)
    return rec
  }

  /** A pod's end as the kubelet plays it: with DEL (terminating, DEL, gone), or without (the leak). */
  const end = (rec: PodRecord, how: PodPlan["end"]["how"], deadline: number) =>
    Effect.gen(function* () {
      if (how === "del") {
        if (yield* kubelet.remove(rec, GRACE_SECONDS, "deleted; the kubelet tears the sandbox down", deadline)) {
          if (rec.uid !== undefined) delStarted.add(rec.uid)
          yield* kubelet.del(rec, deadline)
        }
        return yield* kubelet.remove(rec, 0, "sandbox gone, the kubelet removes the object", deadline)
      }
      if (how === "leak-graceful") {
        yield* kubelet.remove(rec, GRACE_SECONDS, "deleted", deadline)
        yield* Effect.sleep("2 seconds")
        return yield* kubelet.remove(rec, 0, "finalised without CNI DEL (the runtime lost the sandbox)", deadline)
      }
      return yield* kubelet.remove(rec, 0, how === "rebirth" ? "force-deleted; its StatefulSet recreates it" : "force-deleted without CNI DEL", deadline)
    })

  /** A Job pod: finishes, maybe with DEL, and its object goes later (or stays past the end of the run). */
  const finishJob = (rec: PodRecord, p: PodPlan, deadline: number) =>
    Effect.gen(function* () {
      const job = p.job!
      if (!(yield* kubelet.setPhase(rec, job.phase, deadline))) return
      if (job.del) {
        if (rec.uid !== undefined) delStarted.add(rec.uid)
        yield* kubelet.del(rec, deadline)
      }
      if (t0 + job.removeAt > endAt) return
      yield* until(t0 + job.removeAt)
      yield* kubelet.remove(rec, 0, "its Job's TTL ran out", deadline)
    })

  const lifecycle = (p: PodPlan, rec: PodRecord, previous: Deferred.Deferred<void> | undefined, mine: Deferred.Deferred<void>) =>
    Effect.gen(function* () {
      yield* until(t0 + p.at)
      if (previous !== undefined) yield* Deferred.await(previous)
      const endsAt = Math.min(t0 + p.end.at, endAt)
      const deadline = endsAt + 30_000
      yield* Effect.either(kubelet.create(rec, deadline))
      if (rec.uid === undefined) {
        rec.state = "never-started"
        yield* Deferred.succeed(rec.started, undefined)
        return
      }
      byUid.set(rec.uid, rec)
      if (p.kind === "bad") yield* Deferred.succeed(rec.started, undefined)
      else yield* kubelet.start(rec, endsAt)
      if (p.malformed !== undefined && rec.state === "running" && t0 + p.malformed.at < endsAt) {
        yield* until(t0 + p.malformed.at)
        yield* kubelet.malform(rec, p.malformed.variant, deadline)
      }
      if (p.end.how === "node") return yield* Deferred.await(nodeDone.get(p.id)!)
      if (t0 + p.end.at > endAt) return
      yield* until(t0 + p.end.at)
      if (p.kind === "job") yield* finishJob(rec, p, deadline)
      else yield* end(rec, p.end.how, deadline)
    }).pipe(Effect.ensuring(Deferred.succeed(mine, undefined)))

  /** A node dies: unreachable, its pods evicted or deleted and then force-deleted, the Node removed; another joins. */
  const nodeDeath = (d: NodeDeath) =>
    Effect.gen(function* () {
      yield* until(t0 + d.at)
      deps.history.add(["nodes", `node ${d.node}`], `workload: node ${d.node} dies (${d.variant}), ${d.pods.length} pods on it`)
      yield* deps.nodes.unreachable(d.node)
      const victims: Array<PodRecord> = []
      for (const id of d.pods) {
        const rec = records.get(id)
        if (rec === undefined) continue
        yield* Deferred.await(rec.started).pipe(Effect.timeout("90 seconds"), Effect.ignore)
        if (rec.uid !== undefined && rec.state !== "gone") victims.push(rec)
      }
      const deadline = Date.now() + 180_000
      yield* Effect.sleep("3 seconds")
      const half = Math.ceil(victims.length / 2)
      if (d.variant === "taint-manager") {
        yield* Effect.forEach(victims, (r) => kubelet.evict(r, deadline), { concurrency: 16, discard: true })
        yield* until(t0 + d.at + 60_000)
        yield* deps.nodes.remove(d.node)
      } else {
        // A rollout deletes some of them (graceful; no kubelet answers, so they stay terminating).
        yield* Effect.forEach(victims.slice(0, half), (r) => kubelet.remove(r, GRACE_SECONDS, "deleted while its node is unreachable", deadline), { concurrency: 16, discard: true })
        yield* Effect.sleep("2 seconds")
        if (d.variant === "out-of-service") {
          yield* deps.nodes.outOfService(d.node)
          yield* Effect.forEach(victims.slice(half), (r) => kubelet.evict(r, deadline), { concurrency: 16, discard: true })
        } else yield* deps.nodes.remove(d.node)
      }
      // The pod garbage collector force-deletes what is left of a node that is gone or out of service.
      yield* until(t0 + d.at + 90_000)
      yield* Effect.forEach(victims, (r) => kubelet.remove(r, 0, "force-deleted by the pod garbage collector", deadline), { concurrency: 16, discard: true })
      if (d.variant === "out-of-service") yield* deps.nodes.remove(d.node)
    }).pipe(Effect.ensuring(Effect.forEach(d.pods, (id) => Deferred.succeed(nodeDone.get(id)!, undefined), { discard: true })))

  const replacement = (d: NodeDeath) => Effect.zipRight(until(t0 + d.replacement.at), deps.nodes.join(d.replacement.node))

  const nads = nadOps(deps.history)
  const nadStory = Effect.forEach(
    plan.nadOps,
    (op) =>
      Effect.gen(function* () {
        yield* until(t0 + op.at)
        const net = netByKey(op.net)!
        if (op.kind === "edit") return yield* Effect.ignore(nads.edit(net, op.variant))
        yield* Effect.ignore(nads.remove(net))
        yield* until(t0 + op.recreateAt)
        yield* Effect.ignore(nads.create(net))
      }),
    { discard: true }
  )

  /** The whole workload; returns once every planned step that starts before the end has run. */
  const run: Effect.Effect<void, never, KubeApi> = Effect.gen(function* () {
    for (const d of plan.nodeDeaths) for (const id of d.pods) nodeDone.set(id, Deferred.unsafeMake(FiberId.none))
    const nodeStories = plan.nodeDeaths.filter((d) => t0 + d.at < endAt).flatMap((d) => [nodeDeath(d), replacement(d)])
    const pods = plan.pods
      .filter((p) => t0 + p.at < endAt)
      .map((p) => {
        // Chained in plan order here, before any fiber runs: each incarnation waits for the one before.
        const rec = recordOf(p)
        const previous = chains.get(rec.ref)
        const mine = Deferred.unsafeMake<void>(FiberId.none)
        chains.set(rec.ref, mine)
        return Effect.catchAllCause(lifecycle(p, rec, previous, mine), (c) => Effect.sync(() => deps.history.add([rec.ref], `workload: lifecycle failed: ${String(c).slice(0, 300)}`)))
      })
    yield* Effect.all([...pods, ...nodeStories.map(Effect.ignore), nadStory], { concurrency: "unbounded", discard: true })
  })

  return { run, records, byUid, delStarted }
}

export type Workload = ReturnType<typeof makeWorkload>
