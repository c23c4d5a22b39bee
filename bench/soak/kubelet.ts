/**
 * The node side, as the live tier plays it (test/live/support/upstream-plugin.ts): the pod objects
 * the scheduler would bind, the real plugin's ADD per attachment (a new container id per sandbox
 * attempt, retried with backoff), Multus's network-status and Running; on deletion CNI DEL before
 * the final delete, or none (the leak). Every step goes into the pod's history.
 */
import * as fs from "node:fs"
import { Deferred, Duration, Effect } from "effect"
import { NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION } from "../../src/domain/multus.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import { isRetryableKubeError, type KubeError } from "../../src/services/KubeError.ts"
import * as R from "../../src/services/resources.ts"
import { nowTime } from "../../test/live/support/node-status.ts"
import { type Credentials, rest } from "../../test/live/support/rest.ts"
import { PluginNode, type PluginNodeShape, type PluginRequest, networkStatusOf, newContainerId, pluginAdd, pluginDel, writePluginNode } from "../../test/live/support/upstream-plugin.ts"
import { addressKey, type History } from "./history.ts"
import { type Attached, canonicalIP } from "./invariants.ts"
import { netByKey, POOLS_NAMESPACE } from "./networks.ts"
import type { PodPlan } from "./plan.ts"

/** terminationGracePeriodSeconds of every soak pod. */
export const GRACE_SECONDS = 10

export type Held = Attached & { readonly ifname: string }

export interface PodRecord {
  readonly plan: PodPlan
  readonly ref: string
  uid: string | undefined
  /** What the plugin handed out, by attachment (the network-status the kubelet wrote). */
  attached: ReadonlyArray<Held>
  containerId: string | undefined
  state: "planned" | "starting" | "running" | "ending" | "gone" | "never-started"
  /** Done once the start is over: running, or given up. */
  readonly started: Deferred.Deferred<void>
  addFailures: number
  /** When the final delete answered (ms since the epoch). */
  deletedAt: number | undefined
  /** When the object was created, and when it was Running (ms since the epoch). */
  createdAt: number | undefined
  runningAt: number | undefined
}

interface KubeletDeps {
  readonly creds: Credentials
  readonly history: History
  readonly plugin: string
  readonly adminKubeconfig: string
  /** Most plugin processes at once: two cores run the API server and the controllers too. */
  readonly pluginSlots: Effect.Semaphore
}

/** `effect` again after `firstMs`, doubling up to `maxMs`, while `retry(failure, wait)` agrees and `deadline` (ms since the epoch) leaves room. */
const backoff = <A, E, R>(effect: Effect.Effect<A, E, R>, deadline: number, retry: (e: E, delayMs: number) => boolean = () => true, firstMs = 200, maxMs = 5_000) =>
  Effect.gen(function* () {
    for (let delay = firstMs; ; delay = Math.min(delay * 2, maxMs)) {
      const r = yield* Effect.either(effect)
      if (r._tag === "Right") return r.right
      if (!retry(r.left, delay) || Date.now() + delay > deadline) return yield* Effect.fail(r.left)
      yield* Effect.sleep(Duration.millis(delay))
    }
  })

/** Retries `effect` on retryable API failures with capped backoff until `deadline` (ms since the epoch). */
export const persist = <A, R>(effect: Effect.Effect<A, KubeError, R>, deadline: number): Effect.Effect<A, KubeError, R> => backoff(effect, deadline, isRetryableKubeError)

/** PATCH (merge) of a status subresource at `path`, retried until `deadline`; false when the object is gone or time ran out. */
export const patchStatusAt = (creds: Credentials, path: string, status: Record<string, unknown>, deadline: number): Effect.Effect<boolean> => {
  const once = Effect.promise(() => rest(creds, "PATCH", path, { status }, "application/merge-patch+json").catch(() => ({ status: 0 })))
  return backoff(Effect.filterOrFail(once, (res) => res.status === 200 || res.status === 404), deadline).pipe(
    Effect.map((res) => res.status === 200),
    Effect.orElseSucceed(() => false)
  )
}

const nadConfigOf = (key: string) =>
  Effect.flatMap(KubeApi, (api) => {
    const [ns, name] = key.split("/") as [string, string]
    return Effect.map(api.get(R.NetworkAttachmentDefinitions, ns, name), (nad) => String((nad["spec"] as { config?: unknown } | undefined)?.config ?? ""))
  })

export type Kubelet = ReturnType<typeof makeKubelet>

export const makeKubelet = (deps: KubeletDeps) => {
  const nodes = new Map<string, PluginNodeShape>()
  const nodeOf = (node: string): PluginNodeShape => {
    let shape = nodes.get(node)
    if (shape === undefined) nodes.set(node, (shape = writePluginNode({ binary: deps.plugin, kubeconfig: deps.adminKubeconfig, namespace: POOLS_NAMESPACE, nodeName: node })))
    return shape
  }
  const log = (rec: PodRecord, text: string, extra: ReadonlyArray<string> = []) => deps.history.add([rec.ref, ...extra], `kubelet: ${rec.ref} ${text}`)
  const patchStatus = (rec: PodRecord, status: Record<string, unknown>, deadline: number) =>
    patchStatusAt(deps.creds, `/api/v1/namespaces/${rec.plan.namespace}/pods/${rec.plan.name}/status`, status, deadline)
  /** The real plugin for one attachment of the pod's sandbox, on its node, in a plugin slot. */
  const plugin = <A, E>(run: (req: PluginRequest) => Effect.Effect<A, E, PluginNode>, rec: PodRecord, containerId: string, ifname: string, config: string) => {
    const req = { podNamespace: rec.plan.namespace, podName: rec.plan.name, podUid: rec.uid ?? "", containerId, ifname, config }
    return deps.pluginSlots.withPermits(1)(Effect.provideService(run(req), PluginNode, nodeOf(rec.plan.node)))
  }

  const addressKeys = (held: ReadonlyArray<Attached>) => held.flatMap((h) => h.ips.map((ip) => addressKey(h.network, ip)))
  const setNetworkStatus = (rec: PodRecord, text: string, deadline: number) =>
    Effect.flatMap(KubeApi, (api) => Effect.either(persist(api.patch(R.Pods, rec.plan.namespace, rec.plan.name, { type: "merge", body: { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: text } } } }), deadline)))

  /** The pod object as the scheduler leaves it: bound to its node, the `networks` request set. */
  const create = (rec: PodRecord, deadline: number) =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const p = rec.plan
      const networks = p.kind === "bad" ? '[{"name": ' : p.nets.map((a) => `${a.net}@${a.ifname}`).join(",")
      const pod = yield* persist(
        api.create(R.Pods, p.namespace, {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: p.name, namespace: p.namespace, labels: { soak: "1", "soak/kind": p.kind }, annotations: { [NETWORKS_ANNOTATION]: networks } },
          spec: { nodeName: p.node, terminationGracePeriodSeconds: GRACE_SECONDS, containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }] }
        }),
        deadline
      )
      rec.uid = pod.metadata.uid
      rec.createdAt = Date.now()
      log(rec, `created uid=${rec.uid} on ${p.node}${p.kind === "bad" ? " with an unreadable networks annotation" : ""}`)
    })

  /** One sandbox: ADD for every attachment in order, with a new container id. */
  const sandbox = (rec: PodRecord) =>
    Effect.gen(function* () {
      const containerId = newContainerId()
      const held: Array<Held> = []
      for (const a of rec.plan.nets) {
        const config = yield* nadConfigOf(a.net)
        const ips = yield* plugin(pluginAdd, rec, containerId, a.ifname, config)
        held.push({ net: a.net, network: netByKey(a.net)!.networkName, ifname: a.ifname, ips: ips.map(canonicalIP) })
      }
      return { containerId, held }
    })

  /** ADD until it works or `deadline`, then network-status and Running; resolves `started` either way. */
  const start = (rec: PodRecord, deadline: number) =>
    Effect.gen(function* () {
      rec.state = "starting"
      const failed = (e: { readonly message: string }, delay: number) => {
        rec.addFailures++
        log(rec, `sandbox failed, retrying in ${delay} ms: ${e.message.split("\n")[0]}`)
        return true
      }
      const got = yield* Effect.either(backoff(sandbox(rec), deadline, failed, 1_000, 10_000))
      if (got._tag === "Left") {
        rec.state = "never-started"
        return
      }
      rec.containerId = got.right.containerId
      rec.attached = got.right.held
      log(rec, `ADD (container ${got.right.containerId.slice(0, 12)}): ${got.right.held.map((h) => `${h.ifname} ${h.net} ${h.ips.join(",")}`).join("; ")}`, addressKeys(got.right.held))
      const ips = rec.attached.map((h) => ({ network: h.net, ifname: h.ifname, ips: [...h.ips] }))
      const annotated = yield* setNetworkStatus(rec, networkStatusOf(ips), deadline)
      if (annotated._tag === "Left" || !(yield* patchStatus(rec, { phase: "Running" }, deadline))) {
        log(rec, "could not write its network-status or phase; left Pending")
        rec.state = "never-started"
        return
      }
      rec.state = "running"
      rec.runningAt = Date.now()
      log(rec, "Running")
    }).pipe(Effect.ensuring(Deferred.succeed(rec.started, undefined)))

  /** CNI DEL for every attachment, in reverse order as Multus does; an attachment whose NAD is gone gets none (Multus cannot). */
  const del = (rec: PodRecord, deadline: number) =>
    Effect.gen(function* () {
      if (rec.containerId === undefined) return
      for (const h of [...rec.attached].reverse()) {
        const config = yield* Effect.either(nadConfigOf(h.net))
        if (config._tag === "Left") {
          log(rec, `no DEL on ${h.ifname}: ${config.left.reason === "NotFound" ? `NAD ${h.net} is gone` : config.left.message}`)
          continue
        }
        const done = yield* Effect.either(backoff(plugin(pluginDel, rec, rec.containerId, h.ifname, config.right), deadline, () => true, 1_000, 10_000))
        log(rec, done._tag === "Right" ? `DEL ${h.ifname} ${h.ips.join(",")}` : `DEL ${h.ifname} failed: ${done.left.message.split("\n")[0]}`, addressKeys([h]))
      }
    })

  /** DELETE with a grace period (0: the object goes at once); done when it answered or the pod was gone. */
  const remove = (rec: PodRecord, grace: number, why: string, deadline: number) =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const r = yield* Effect.either(persist(api.delete(R.Pods, rec.plan.namespace, rec.plan.name, { gracePeriodSeconds: grace, ...(rec.uid === undefined ? {} : { preconditions: { uid: rec.uid } }) }), deadline))
      if (r._tag === "Left" && r.left.reason !== "NotFound") {
        log(rec, `delete (grace ${grace}) failed: ${r.left.message}`)
        return false
      }
      if (grace === 0) {
        rec.state = "gone"
        rec.deletedAt = Date.now()
      } else rec.state = "ending"
      log(rec, `${grace === 0 ? "deleted" : `deleted with grace ${grace} s (terminating)`}: ${why}`)
      return true
    })

  /** Overwrites the network-status with something no reader can parse (the pod keeps running on its addresses). */
  const malform = (rec: PodRecord, variant: "not-json" | "wrong-shape", deadline: number) =>
    Effect.gen(function* () {
      const text = variant === "not-json" ? "[{not json" : '{"name": 5}'
      const r = yield* setNetworkStatus(rec, text, deadline)
      log(rec, r._tag === "Right" ? `network-status overwritten with ${JSON.stringify(text)}` : `could not overwrite its network-status: ${r.left.message}`)
    })

  /** What the taint manager does to a pod of an unreachable node: the DisruptionTarget condition, then a graceful delete. */
  const evict = (rec: PodRecord, deadline: number) =>
    Effect.gen(function* () {
      const condition = { type: "DisruptionTarget", status: "True", reason: "DeletionByTaintManager", message: "Taint manager: deleting due to NoExecute taint", lastTransitionTime: nowTime() }
      if (yield* patchStatus(rec, { conditions: [condition] }, deadline)) log(rec, "marked DisruptionTarget/DeletionByTaintManager")
      return yield* remove(rec, GRACE_SECONDS, "evicted by the taint manager", deadline)
    })

  const setPhase = (rec: PodRecord, phase: "Succeeded" | "Failed", deadline: number) =>
    Effect.map(patchStatus(rec, { phase }, deadline), (ok) => (log(rec, ok ? `phase ${phase}` : `could not set phase ${phase}`), ok))

  const cleanup = () => {
    for (const n of nodes.values()) fs.rmSync(n.dir, { recursive: true, force: true })
  }

  return { create, start, del, remove, malform, evict, setPhase, cleanup }
}
