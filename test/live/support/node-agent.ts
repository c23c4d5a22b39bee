/**
 * A node of the live tier, played in this process: kubelet + Multus for the pods the scheduler binds
 * to it, with the real upstream whereabouts plugin (upstream-plugin.ts).
 *
 * - It registers its Node and keeps it Ready (node-status.ts): heartbeats and the Lease.
 * - A pod bound to it gets a sandbox: the plugin's ADD per attachment of its `networks` annotation
 *   (names, `ns/name@if`, the JSON form; interfaces net1, net2, … where none is named), in order,
 *   as Multus delegates; when one fails, DEL of those made, newest first, as Multus undoes, and a
 *   new sandbox later with backoff, as the kubelet retries (a full pool frees up). Then Multus's
 *   network-status and the kubelet's Running/Ready status.
 * - A pod annotated with AGENT_EXIT_CODE ends on its own after AGENT_RUNS_FOR seconds: Succeeded
 *   (0) or Failed; its object stays, as a Job's does.
 * - A deleted pod stops after its grace period (at most `stopDelay`), ends Failed, and gets the
 *   final delete (grace 0, uid precondition). With `teardown: "del"` the plugin's DEL runs for
 *   every attachment first, as a kubelet tears a sandbox down; with `"leak"` it does not: the
 *   allocation is left for the controller under test, so every free is the controller's.
 * - A dead node (`die`) does nothing at all: no heartbeat, no Lease, no pod handled; what it ran
 *   keeps running as far as anyone can tell. `revive` brings it back: it posts Ready, finishes the
 *   pods deleted meanwhile and starts those bound meanwhile.
 */
import * as fs from "node:fs"
import { Duration, Effect, FiberSet, Queue, Schedule, type Scope } from "effect"
import { NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION } from "../../../src/domain/multus.ts"
import { makeInformer } from "../../../src/services/Informer.ts"
import { KubeApi, type KubeObject } from "../../../src/services/KubeApi.ts"
import * as R from "../../../src/services/resources.ts"
import { delegateConfig, type Selected, selectedNetworks } from "./multus.ts"
import { deleteNode, heartbeat, nowTime, registerNode } from "./node-status.ts"
import { endedStatus, runningStatus } from "./pod-status.ts"
import { credentialsOf, rest } from "./rest.ts"
import { networkStatusOf, newContainerId, PluginNode, type PluginNodeShape, pluginAdd, pluginDel, writePluginNode } from "./upstream-plugin.ts"

/** On a pod (template): the exit code its container ends with on its own ("0": Succeeded). */
export const AGENT_EXIT_CODE = "node-agent.whereabouts.test/exit-code"
/** On a pod (template): how long it runs before it ends with AGENT_EXIT_CODE (seconds; default 1). */
export const AGENT_RUNS_FOR = "node-agent.whereabouts.test/runs-for-seconds"

export interface NodeAgentOptions {
  readonly name: string
  /** Node labels besides the kubelet's own (a zone, a label workloads select). */
  readonly labels?: Readonly<Record<string, string>>
  /** The whereabouts plugin executable. */
  readonly plugin: string
  /** An admin kubeconfig: the plugin's, and the agent's for status subresources. */
  readonly kubeconfig: string
  /** Where the plugin keeps its IPPools, reservations and Lease. */
  readonly poolsNamespace: string
  /** What a deletion does to the sandbox: DEL ("del", a kubelet) or nothing ("leak"). */
  readonly teardown: "del" | "leak"
  /** How long a pod's containers take to stop after a graceful delete (never longer than its grace period). Default 500 ms. */
  readonly stopDelay?: Duration.DurationInput
  readonly heartbeatEvery?: Duration.DurationInput
  /** Plugin processes at once, shared by the agents of a test (two cores). */
  readonly pluginSlots: Effect.Semaphore
}

/** A pod this node runs: its sandbox and what the plugin gave each attachment. */
export interface AgentPod {
  readonly ref: string
  readonly uid: string
  readonly containerId: string
  readonly ips: ReadonlyArray<{ readonly network: string; readonly ifname: string; readonly ips: ReadonlyArray<string> }>
}

export interface NodeAgent {
  readonly name: string
  readonly alive: () => boolean
  readonly die: Effect.Effect<void>
  readonly revive: Effect.Effect<void>
  /** The pods whose containers run here now (sandbox up, not stopped), while the node is alive. */
  readonly running: () => ReadonlyArray<AgentPod>
  /** What it did, one line each, for failure messages. */
  readonly history: (lines?: number) => string
}

interface Attached {
  readonly network: string
  readonly ifname: string
  readonly ips: ReadonlyArray<string>
  /** The config the ADD ran with: DEL gets the same, as Multus keeps it in its cache. */
  readonly config: string
}

interface PodRecord {
  readonly ref: string
  readonly uid: string
  pod: KubeObject
  /** pending: no sandbox yet; running; finished: ended on its own; stopped: its final delete sent. */
  state: "pending" | "running" | "finished" | "stopped"
  containerId: string | undefined
  attached: ReadonlyArray<Attached>
  /** When it ends on its own (ms since the epoch). */
  finishAt: number | undefined
  /** The object is gone from the API server. */
  gone: boolean
  /** Deleted or ended while the node was dead: not run again, only finished. */
  abandoned: boolean
  readonly lock: Effect.Semaphore
}

const terminal = (pod: KubeObject) => ["Succeeded", "Failed"].includes(String((pod["status"] as { phase?: unknown } | undefined)?.phase))
const deleting = (pod: KubeObject) => pod.metadata.deletionTimestamp !== undefined

interface Agent {
  readonly options: NodeAgentOptions
  readonly creds: ReturnType<typeof credentialsOf>
  readonly plugin: PluginNodeShape
  readonly records: Map<string, PodRecord>
  readonly lines: Array<string>
  readonly fibers: FiberSet.FiberSet<unknown, unknown>
  alive: boolean
  nodeUid: string
  readySince: string
}

const log = (agent: Agent, text: string) => {
  agent.lines.push(`${new Date().toISOString().slice(11, 23)} ${agent.options.name}: ${text}`)
  if (agent.lines.length > 20_000) agent.lines.splice(0, 5_000)
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e)).split("\n")[0]!

const withPlugin = <A, E>(agent: Agent, effect: Effect.Effect<A, E, PluginNode>) =>
  agent.options.pluginSlots.withPermits(1)(Effect.provideService(effect, PluginNode, agent.plugin))

/** DEL for `attached`, newest first, with the sandbox's container id; failures are logged (DEL must be idempotent). */
const delAll = (agent: Agent, rec: PodRecord, containerId: string, attached: ReadonlyArray<Attached>) =>
  Effect.forEach([...attached].reverse(), (a) => {
    const [podNamespace, podName] = rec.ref.split("/") as [string, string]
    return withPlugin(agent, pluginDel({ podNamespace, podName, podUid: rec.uid, containerId, ifname: a.ifname, config: a.config })).pipe(
      Effect.tap(() => log(agent, `${rec.ref} DEL ${a.ifname} ${a.ips.join(",")}`)),
      Effect.catchAll((e) => Effect.sync(() => log(agent, `${rec.ref} DEL ${a.ifname} failed: ${errorText(e)}`)))
    )
  }, { discard: true })

/** One sandbox: ADD per attachment in order; when one fails, DEL of it and of those made, newest first (Multus). */
const sandbox = (agent: Agent, rec: PodRecord, selected: ReadonlyArray<Selected>) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const containerId = newContainerId()
    const [podNamespace, podName] = rec.ref.split("/") as [string, string]
    const attached: Array<Attached> = []
    for (const s of selected) {
      const network = `${s.namespace}/${s.name}`
      const nad = yield* Effect.either(api.get(R.NetworkAttachmentDefinitions, s.namespace, s.name))
      if (nad._tag === "Left") {
        yield* delAll(agent, rec, containerId, attached)
        return yield* Effect.fail(new Error(`NAD ${network}: ${nad.left.message}`))
      }
      const config = delegateConfig(String((nad.right["spec"] as { config?: unknown } | undefined)?.config ?? ""), s.name)
      const ips = yield* Effect.either(withPlugin(agent, pluginAdd({ podNamespace, podName, podUid: rec.uid, containerId, ifname: s.ifname, config })))
      if (ips._tag === "Left") {
        yield* delAll(agent, rec, containerId, [...attached, { network, ifname: s.ifname, ips: [], config }])
        return yield* Effect.fail(new Error(`ADD ${s.ifname} (${network}): ${errorText(ips.left.message)}`))
      }
      attached.push({ network, ifname: s.ifname, ips: ips.right, config })
    }
    return { containerId, attached }
  })

/** A strategic merge patch of the pod's status, for this incarnation only (its uid in the patch). */
const postStatus = (agent: Agent, rec: PodRecord, status: Record<string, unknown>) =>
  Effect.gen(function* () {
    const [ns, name] = rec.ref.split("/") as [string, string]
    const body = { metadata: { uid: rec.uid }, status }
    const res = yield* Effect.promise(() =>
      rest(agent.creds, "PATCH", `/api/v1/namespaces/${ns}/pods/${name}/status`, body, "application/strategic-merge-patch+json").catch((e: Error) => ({ status: 0, body: e.message }))
    )
    if (res.status !== 200) log(agent, `${rec.ref} status ${String(status["phase"] ?? "")} not written: HTTP ${res.status} ${res.body.slice(0, 200)}`)
    return res.status === 200
  })

/** Multus's network-status on this incarnation of the pod (a JSON patch that tests its uid). */
const writeNetworkStatus = (rec: PodRecord) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const [ns, name] = rec.ref.split("/") as [string, string]
    const value = networkStatusOf(rec.attached.map((a) => ({ network: a.network, ifname: a.ifname, ips: a.ips })))
    const annotate =
      rec.pod.metadata.annotations === undefined
        ? { op: "add" as const, path: "/metadata/annotations", value: { [NETWORK_STATUS_ANNOTATION]: value } }
        : { op: "add" as const, path: `/metadata/annotations/${NETWORK_STATUS_ANNOTATION.replace("/", "~1")}`, value }
    yield* api.patch(R.Pods, ns, name, { type: "json", ops: [{ op: "test", path: "/metadata/uid", value: rec.uid }, annotate] })
  })

/** The kubelet's last word: delete with grace 0, for this incarnation only. */
const finalDelete = (agent: Agent, rec: PodRecord) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const [ns, name] = rec.ref.split("/") as [string, string]
    const r = yield* Effect.either(api.delete(R.Pods, ns, name, { gracePeriodSeconds: 0, preconditions: { uid: rec.uid } }))
    if (r._tag === "Left" && r.left.reason !== "NotFound" && r.left.reason !== "Conflict") log(agent, `${rec.ref} final delete failed: ${r.left.message}`)
    else log(agent, `${rec.ref} deleted`)
    rec.state = "stopped"
  })

/** The sandbox's teardown: DEL of every attachment, or, leaking, nothing. */
const teardown = (agent: Agent, rec: PodRecord) =>
  agent.options.teardown === "del" && rec.containerId !== undefined ? delAll(agent, rec, rec.containerId, rec.attached) : Effect.void

/** Sandboxes until one is up, with the kubelet's backoff; gives up while the pod is deleted, gone or the node dead. */
const start = (agent: Agent, rec: PodRecord) =>
  Effect.gen(function* () {
    let selected: ReadonlyArray<Selected>
    try {
      selected = selectedNetworks(rec.pod.metadata.annotations?.[NETWORKS_ANNOTATION], rec.ref.split("/")[0]!)
    } catch (e) {
      return log(agent, `${rec.ref} cannot start: ${errorText(e)}`)
    }
    for (let delay = 1_000; ; delay = Math.min(delay * 2, 10_000)) {
      if (!agent.alive || rec.gone || deleting(rec.pod)) return
      const got = yield* Effect.either(sandbox(agent, rec, selected))
      if (got._tag === "Right") {
        rec.containerId = got.right.containerId
        rec.attached = got.right.attached
        rec.state = "running"
        break
      }
      log(agent, `${rec.ref} sandbox failed, again in ${delay} ms: ${got.left.message}`)
      yield* Effect.sleep(Duration.millis(delay))
    }
    log(agent, `${rec.ref} sandbox ${rec.containerId!.slice(0, 12)}: ${rec.attached.map((a) => `${a.ifname} ${a.ips.join(",")}`).join("; ")}`)
    const annotated = yield* Effect.either(writeNetworkStatus(rec))
    if (annotated._tag === "Left") return log(agent, `${rec.ref} network-status not written: ${annotated.left.message}`)
    yield* postStatus(agent, rec, runningStatus(rec.pod, rec.containerId ?? ""))
    const exit = rec.pod.metadata.annotations?.[AGENT_EXIT_CODE]
    if (exit !== undefined) {
      rec.finishAt = Date.now() + 1_000 * Number(rec.pod.metadata.annotations?.[AGENT_RUNS_FOR] ?? 1)
      yield* FiberSet.run(agent.fibers, Effect.sleep(Duration.millis(rec.finishAt - Date.now())).pipe(Effect.zipRight(kick(agent, rec))))
    }
  })

/**
 * What the node does next for one pod, from what it knows now (level-triggered: every event and
 * the node's return call it again). One step at a time per pod.
 */
const step = (agent: Agent, rec: PodRecord): Effect.Effect<void, never, KubeApi> =>
  rec.lock.withPermits(1)(
    Effect.gen(function* () {
      if (!agent.alive || rec.state === "stopped") return
      if (rec.gone) {
        if (rec.state === "running") yield* teardown(agent, rec)
        rec.state = "stopped"
        agent.records.delete(rec.uid)
        return log(agent, `${rec.ref} gone`)
      }
      const pod = rec.pod
      if (rec.state === "pending") {
        if (deleting(pod)) return yield* finalDelete(agent, rec)
        if (terminal(pod)) return void (rec.state = "finished")
        return yield* start(agent, rec)
      }
      if (rec.state === "running" && deleting(pod)) {
        const grace = 1_000 * (pod.metadata.deletionGracePeriodSeconds ?? 30)
        yield* Effect.sleep(Duration.millis(Math.min(grace, Duration.toMillis(Duration.decode(agent.options.stopDelay ?? "500 millis")))))
        if (!agent.alive) return
        yield* teardown(agent, rec)
        rec.state = "finished"
        yield* postStatus(agent, rec, endedStatus(rec.pod, rec.containerId ?? "", 143))
        return yield* finalDelete(agent, rec)
      }
      if (rec.state === "running" && terminal(pod)) {
        // Failed by someone else (pod GC marks a pod of a deleted Node Failed before deleting it).
        rec.state = "finished"
        return yield* teardown(agent, rec)
      }
      if (rec.state === "running" && rec.finishAt !== undefined && Date.now() >= rec.finishAt) {
        const code = Number(pod.metadata.annotations?.[AGENT_EXIT_CODE] ?? 0)
        rec.state = "finished"
        log(agent, `${rec.ref} exits ${code}`)
        yield* postStatus(agent, rec, endedStatus(rec.pod, rec.containerId ?? "", code))
        return yield* teardown(agent, rec)
      }
      if (rec.state === "finished" && deleting(pod)) yield* finalDelete(agent, rec)
    })
  )

const kick = (agent: Agent, rec: PodRecord): Effect.Effect<void, never, KubeApi> => Effect.asVoid(FiberSet.run(agent.fibers, step(agent, rec)))

const uidOf = (pod: KubeObject) => pod.metadata.uid ?? ""

/** A pod bound here, as last seen. */
const seen = (agent: Agent, pod: KubeObject) => {
  const uid = uidOf(pod)
  let rec = agent.records.get(uid)
  if (rec === undefined) {
    rec = {
      ref: `${pod.metadata.namespace}/${pod.metadata.name}`,
      uid,
      pod,
      state: "pending",
      containerId: undefined,
      attached: [],
      finishAt: undefined,
      gone: false,
      abandoned: false,
      lock: Effect.unsafeMakeSemaphore(1)
    }
    agent.records.set(uid, rec)
  }
  rec.pod = pod
  return kick(agent, rec)
}

const vanished = (agent: Agent, uid: string) => {
  const rec = agent.records.get(uid)
  if (rec === undefined) return Effect.void
  rec.gone = true
  return kick(agent, rec)
}

/** The node's heartbeats; a Node deleted under a live node is registered again, as a kubelet does. */
const beat = (agent: Agent) =>
  Effect.gen(function* () {
    if (!agent.alive) return
    const { name, labels } = agent.options
    if ((yield* heartbeat(agent.creds, name, agent.nodeUid, agent.readySince)) === "gone") {
      log(agent, "Node gone: registering again")
      agent.nodeUid = yield* registerNode(agent.creds, name, labels ?? {}, agent.readySince)
    }
  }).pipe(Effect.catchAll((e) => Effect.sync(() => log(agent, `heartbeat failed: ${errorText(e)}`))))

/**
 * Registers the Node and runs the agent until the scope closes (then the Node is deleted, its
 * Lease with it, and the plugin's files removed). Needs a KubeApi over an admin kubeconfig.
 */
export const startNodeAgent = (options: NodeAgentOptions): Effect.Effect<NodeAgent, Error, KubeApi | Scope.Scope> =>
  Effect.gen(function* () {
    const creds = credentialsOf(options.kubeconfig)
    const plugin = writePluginNode({ binary: options.plugin, kubeconfig: options.kubeconfig, namespace: options.poolsNamespace, nodeName: options.name })
    const agent: Agent = { options, creds, plugin, records: new Map(), lines: [], fibers: yield* FiberSet.make(), alive: true, nodeUid: "", readySince: nowTime() }
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        agent.alive = false
        yield* FiberSet.clear(agent.fibers)
        yield* Effect.ignore(deleteNode(creds, options.name))
        yield* Effect.sync(() => fs.rmSync(plugin.dir, { recursive: true, force: true }))
      })
    )
    agent.nodeUid = yield* registerNode(creds, options.name, options.labels ?? {}, agent.readySince)
    yield* beat(agent)
    yield* FiberSet.run(agent.fibers, Effect.repeat(beat(agent), Schedule.spaced(options.heartbeatEvery ?? "2 seconds")))
    const pods = yield* makeInformer({
      resource: R.Pods,
      fieldSelector: `spec.nodeName=${options.name}`,
      transform: (o) => o,
      keyOf: uidOf,
      versionOf: (o) => o.metadata.resourceVersion
    })
    const events = yield* pods.subscribe
    yield* FiberSet.run(
      agent.fibers,
      Effect.forever(
        Effect.flatMap(Queue.take(events), (e) => (!agent.alive ? Effect.void : e.type === "delete" ? vanished(agent, uidOf(e.object)) : seen(agent, e.object)))
      )
    )
    yield* pods.awaitSynced
    const revive = Effect.gen(function* () {
      if (agent.alive) return
      agent.alive = true
      agent.readySince = nowTime()
      log(agent, "back")
      yield* beat(agent)
      const current = new Map(pods.values().map((p) => [uidOf(p), p] as const))
      for (const rec of agent.records.values()) {
        const pod = current.get(rec.uid)
        if (pod === undefined) yield* vanished(agent, rec.uid)
        else if (rec.state === "running" && (deleting(pod) || terminal(pod))) {
          // Deleted or failed while the node was away: the kubelet kills it before anything else.
          rec.abandoned = true
          log(agent, `${rec.ref} ended while the node was away`)
        } else if (rec.state === "running") yield* postStatus(agent, rec, runningStatus(pod, rec.containerId ?? ""))
      }
      for (const pod of current.values()) yield* seen(agent, pod)
    })
    return {
      name: options.name,
      alive: () => agent.alive,
      die: Effect.sync(() => {
        agent.alive = false
        log(agent, "dead")
      }),
      revive: Effect.provideService(revive, KubeApi, yield* KubeApi),
      running: () =>
        agent.alive
          ? [...agent.records.values()].filter((r) => r.state === "running" && !r.abandoned && r.containerId !== undefined).map((r) => ({ ref: r.ref, uid: r.uid, containerId: r.containerId!, ips: r.attached.map(({ network, ifname, ips }) => ({ network, ifname, ips })) }))
          : [],
      history: (lines = 60) => agent.lines.slice(-lines).join("\n")
    } satisfies NodeAgent
  })
