/**
 * The whereabouts CNI plugin and the node runtime around it (kubelet + Multus), played in
 * process: the demo, the tests and the benchmarks allocate addresses exactly as the plugin
 * does — lowest free address, resourceVersion-guarded pool writes, overlapping-range
 * reservations — so the controller is exercised against realistic data.
 */
import { randomUUID } from "node:crypto"
import { Data, Effect, Either, Option } from "effect"
import { assignIP, releaseById, withAssignment } from "./allocate.ts"
import { type IPAddress, formatIP, ipEquals } from "../domain/ip.ts"
import { NETWORK_STATUS_ANNOTATION } from "../domain/multus.ts"
import { poolName, reservationName } from "../domain/pool.ts"
import { IPPoolStore } from "../services/IPPoolStore.ts"
import { type PluginConfig, decodePluginConfig } from "./plugin-config.ts"
import { PluginStore } from "./PluginStore.ts"
import { KubeApi, type KubeObject } from "../services/KubeApi.ts"
import * as R from "../services/resources.ts"

export class CniError extends Data.TaggedError("CniError")<{ readonly message: string }> {}

/** Upstream retries a contended pool this many times. */
const DATASTORE_RETRIES = 100

export interface CniRequest {
  readonly podNamespace: string
  readonly podName: string
  readonly containerId: string
  readonly ifname: string
  /** The NAD's `spec.config`, as Multus hands it to the plugin. */
  readonly config: string
}

const whereabouts = (config: string): Either.Either<PluginConfig, CniError> => {
  const decoded = decodePluginConfig(config)
  if (Either.isLeft(decoded)) return Either.left(new CniError({ message: decoded.left.message }))
  if (decoded.right._tag !== "Whereabouts") return Either.left(new CniError({ message: "not a whereabouts config" }))
  return Either.right(decoded.right.config)
}

class Retry extends Data.TaggedError("Retry")<{}> {}

const backoff = Effect.suspend(() => Effect.sleep(`${1 + Math.floor(Math.random() * 5)} millis`))

/**
 * Creates the overlapping-range reservation; an existing one is fine when it is this pod's (a
 * reborn StatefulSet pod keeps it), false when another pod holds it. The spec is podref and ifname
 * only: the plugin writes no container id into reservations.
 */
const claimReservation = (name: string, spec: { readonly podref: string; readonly ifname: string }) =>
  Effect.gen(function* () {
    const writer = yield* PluginStore
    for (let attempt = 0; attempt < 3; attempt++) {
      const created = yield* Effect.either(writer.createReservation(name, spec))
      if (Either.isRight(created)) return true
      if (created.left.reason !== "AlreadyExists") return yield* Effect.fail(created.left)
      const held = yield* writer.getReservation(name)
      // Deleted between our create and get: create it again.
      if (Option.isSome(held)) return held.value.podref === spec.podref
    }
    return false
  })

/** The ADD's own address (an entry it already had) is reserved for another pod: upstream retries until its deadline, then fails. */
const reservedElsewhere = (podref: string, ifname: string, ip: IPAddress, pool: string, holder: string) =>
  new CniError({ message: `${podref} ${ifname} holds ${formatIP(ip)} in pool ${pool}, but its overlapping-range reservation belongs to ${holder}` })

/**
 * CNI ADD: one address per range, as whereabouts 0.9 assigns it. Like upstream, one "this pod's
 * reservation exists already" flag serves every range of the ADD: once a range found the pod's
 * own reservation, no later range writes one. Within a range only the attempt that succeeds
 * counts: upstream also keeps what a retried attempt saw, so a reservation deleted under a re-ADD
 * (by a controller freeing the pod's previous incarnation) is never written again; the simulation
 * writes it.
 */
export const cniAdd = (req: CniRequest) =>
  Effect.gen(function* () {
    const store = yield* IPPoolStore
    const writer = yield* PluginStore
    const config = yield* whereabouts(req.config)
    const podref = `${req.podNamespace}/${req.podName}`
    const request = { id: req.containerId, podref, ifname: req.ifname }
    const ips: Array<IPAddress> = []
    let ownReservationSeen = false
    for (const { range, badExclude } of config.ranges) {
      const name = poolName(range.range, config.networkName)
      const taken: Array<IPAddress> = []
      let assigned: IPAddress | undefined
      for (let attempt = 0; assigned === undefined; attempt++) {
        if (attempt >= DATASTORE_RETRIES) return yield* new CniError({ message: `pool ${name} stayed contended` })
        const pool = yield* store.get(name).pipe(
          Effect.catchIf((e) => e.reason === "NotFound", () => writer.createPool(name, range.range))
        )
        const cidr = pool.pool.cidr
        if (cidr === undefined) return yield* new CniError({ message: `pool ${name} has an invalid range` })
        const raw = Object.fromEntries(pool.pool.entries.map((e) => [e.key, { id: e.id, podref: e.podref, ...(e.ifname === undefined ? {} : { ifname: e.ifname }) }]))
        const candidate = assignIP(range, cidr, raw, request, taken)
        // Upstream parses excludes only when the pod has no entry yet, after reading (creating) the pool.
        if (badExclude !== undefined && !(Either.isRight(candidate) && candidate.right.existing)) {
          return yield* new CniError({ message: `range ${range.range}: exclude ${JSON.stringify(badExclude)} is not an IP address or CIDR` })
        }
        if (Either.isLeft(candidate)) return yield* new CniError({ message: candidate.left.message })
        const { ip, existing } = candidate.right
        const rname = reservationName(ip, config.networkName)
        let ownReservation = false
        if (config.enableOverlappingRanges) {
          const held = yield* writer.getReservation(rname)
          if (Option.isSome(held) && held.value.podref !== podref) {
            // The pod's own entry is its answer however often it asks: the ADD fails, entry untouched.
            if (existing) return yield* reservedElsewhere(podref, req.ifname, ip, name, held.value.podref)
            taken.push(ip)
            continue
          }
          ownReservation = Option.isSome(held)
        }
        const written = yield* Effect.either(
          writer.updatePool(name, (allocations) => {
            const again = assignIP(range, cidr, allocations, request, taken)
            // The same answer as the one checked, or the checks are stale: upstream's write would conflict.
            const same = Either.isRight(again) && ipEquals(again.right.ip, ip) && again.right.existing === existing
            return same ? Either.right(withAssignment(allocations, again.right)) : Either.left(new Retry())
          })
        )
        if (Either.isLeft(written)) {
          const e = written.left
          if (e._tag === "Retry" || e.reason === "Conflict") {
            yield* backoff
            continue
          }
          return yield* Effect.fail(e)
        }
        if (config.enableOverlappingRanges && !ownReservationSeen && !ownReservation && !(yield* claimReservation(rname, { podref, ifname: req.ifname }))) {
          // Another pod's reservation appeared since the check (its owner's DEL freed the pool entry
          // but not yet the reservation). Upstream fails such an ADD; a new address is given back and
          // the next one tried, so no pod ever holds an address without its own reservation. An
          // address the pod held already stays its own, new id and all, and the ADD fails as upstream's.
          if (existing) return yield* reservedElsewhere(podref, req.ifname, ip, name, "another pod")
          yield* writer
            .updatePool(name, (allocations) => Either.right(releaseById(allocations, req.containerId, req.ifname).allocations))
            .pipe(Effect.retry({ times: DATASTORE_RETRIES, while: (e) => e.reason === "Conflict" }))
          taken.push(ip)
          continue
        }
        assigned = ip
        if (ownReservation) ownReservationSeen = true
      }
      ips.push(assigned)
    }
    return ips
  })

/**
 * CNI DEL, range by range as whereabouts 0.9 runs it: frees this container id and ifname's entry
 * and its reservation. Each pool is read through the same get-or-create as ADD (a range never used
 * is left with an empty pool), and the DEL ends, still a success, at the first range without a
 * matching entry and after a reservation delete that found nothing: later ranges are not looked at.
 */
export const cniDel = (req: CniRequest) =>
  Effect.gen(function* () {
    const writer = yield* PluginStore
    const config = yield* whereabouts(req.config)
    for (const { range } of config.ranges) {
      const name = poolName(range.range, config.networkName)
      let freed: IPAddress | undefined
      const write = writer.updatePool(name, (allocations, pool) => {
        const cidr = pool.pool.cidr
        // A pool whose range does not parse fails upstream's read: nothing is written.
        const out = cidr === undefined ? { allocations, freed: undefined } : releaseById(allocations, req.containerId, req.ifname)
        freed = out.freed === undefined || cidr === undefined ? undefined : { family: cidr.family, value: cidr.address + BigInt(out.freed) }
        return Either.right(out.allocations)
      })
      yield* write.pipe(
        Effect.catchIf((e) => e.reason === "NotFound", () => Effect.zipRight(writer.createPool(name, range.range), write)),
        Effect.retry({ times: DATASTORE_RETRIES, while: (e) => e.reason === "Conflict" })
      )
      if (freed === undefined) return
      if (config.enableOverlappingRanges) {
        // By name alone, as upstream deletes it: a reservation another pod holds goes too.
        if ((yield* writer.deleteReservation(reservationName(freed, config.networkName))) === "absent") return
      }
    }
  })

export interface Attachment {
  readonly nad: { readonly namespace: string; readonly name: string }
  readonly ifname: string
}

export interface RunningPod {
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly containerId: string
  readonly ips: ReadonlyArray<{ readonly network: string; readonly ifname: string; readonly ips: ReadonlyArray<string> }>
}

/** A NAD's `spec.config`, as Multus hands it to the plugin ("" when the config lives on the node). */
const nadConfig = (namespace: string, name: string) =>
  Effect.flatMap(KubeApi, (api) => api.get(R.NetworkAttachmentDefinitions, namespace, name)).pipe(
    Effect.map((nad: KubeObject) => String((nad["spec"] as { config?: unknown } | undefined)?.config ?? ""))
  )

/** CNI ADD for every attachment of one sandbox, in order, as Multus runs the plugin. */
export const addAttachments = (namespace: string, name: string, containerId: string, attachments: ReadonlyArray<Attachment>) =>
  Effect.gen(function* () {
    const ips: Array<RunningPod["ips"][number]> = []
    for (const a of attachments) {
      const config = yield* nadConfig(a.nad.namespace, a.nad.name)
      const got = yield* cniAdd({ podNamespace: namespace, podName: name, containerId, ifname: a.ifname, config })
      ips.push({ network: `${a.nad.namespace}/${a.nad.name}`, ifname: a.ifname, ips: got.map(formatIP) })
    }
    return ips
  })

/**
 * What a node does for a new pod: create it, run the plugin per attachment (the `networks`
 * annotation names them), then write Multus' `network-status`.
 */
export const startPod = (namespace: string, name: string, attachments: ReadonlyArray<Attachment>, nodeName = "node-1") =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const networks = attachments.map((a) => `${a.nad.namespace}/${a.nad.name}@${a.ifname}`).join(",")
    const pod = yield* api.create(R.Pods, namespace, {
      metadata: { name, namespace, annotations: { "k8s.v1.cni.cncf.io/networks": networks } },
      spec: { nodeName, containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }] }
    })
    const containerId = randomUUID().replaceAll("-", "")
    const ips = yield* addAttachments(namespace, name, containerId, attachments)
    const status = [
      { name: "cluster-network", interface: "eth0", ips: ["10.244.0.10"], default: true },
      ...ips.map((i) => ({ name: i.network, interface: i.ifname, ips: i.ips }))
    ]
    yield* api.patch(R.Pods, namespace, name, {
      type: "merge",
      body: { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: JSON.stringify(status) } } }
    })
    return { namespace, name, uid: pod.metadata.uid ?? "", containerId, ips } satisfies RunningPod
  })

/**
 * Deletes a pod. With `cniDel` the node runs the plugin's DEL first (the normal path); without it,
 * the allocation is left behind — a node crash, a force deletion — for the controller to free.
 */
export const deletePod = (pod: RunningPod, options: { readonly cniDel?: boolean } = {}) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    if (options.cniDel === true) {
      for (const i of pod.ips) {
        const [ns, nadName] = i.network.split("/") as [string, string]
        const config = yield* nadConfig(ns, nadName)
        yield* cniDel({ podNamespace: pod.namespace, podName: pod.name, containerId: pod.containerId, ifname: i.ifname, config })
      }
    }
    yield* api.delete(R.Pods, pod.namespace, pod.name, { gracePeriodSeconds: 0 })
  })
