/** The benchmark world over any KubeApi: networks, pods started in bulk, a tracker of frees, the invariants at rest. */
import { Duration, Effect, Either, Queue, Stream, SubscriptionRef } from "effect"
import { assignIP } from "../../src/testing/allocate.ts"
import { formatIP, parseCidr, parseIP } from "../../src/domain/ip.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { type IPAllocation, parsePool, poolName, reservationName } from "../../src/domain/pool.ts"
import { makeInformer } from "../../src/services/Informer.ts"
import { KubeApi, type JsonPatchOp, type KubeObject, listAll } from "../../src/services/KubeApi.ts"
import type { KubeError } from "../../src/services/KubeError.ts"
import * as R from "../../src/services/resources.ts"
import { hex, networkStatusFor, realisticPod } from "./pods.ts"
import type { RestReport as LiveRestReport } from "../../test/live/support/bulk.ts"
import { livePodIPs, violations as findViolations } from "../../test/support/invariants.ts"
import { whereaboutsConfig } from "../../test/support/objects.ts"

export const POOL_NAMESPACE = "kube-system"

export interface Network {
  readonly namespace: string
  readonly nad: string
  readonly range: string
  readonly pool: string
  readonly config: string
}

/** `count` whereabouts networks `net-0..` in `namespace`, net-k on 10.k.0.0/16 (one pool each). */
export const networks = (namespace: string, count: number, cidr: (k: number) => string = (k) => `10.${k}.0.0/16`): ReadonlyArray<Network> =>
  Array.from({ length: count }, (_, k) => {
    const range = cidr(k)
    const config = whereaboutsConfig({ range }, `net-${k}`)
    return { namespace, nad: `net-${k}`, range, pool: poolName(range, ""), config }
  })

export const ignoreExists = <A, R>(e: Effect.Effect<A, KubeError, R>) => e.pipe(Effect.asVoid, Effect.catchIf((x) => x.reason === "AlreadyExists", () => Effect.void))

/** Creates the namespaces (real servers need them: the networks' and the pool namespace) and the NADs. */
export const createNetworks = (nets: ReadonlyArray<Network>) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    for (const ns of new Set([...nets.map((n) => n.namespace), POOL_NAMESPACE])) yield* ignoreExists(api.create(R.Namespaces, undefined, { metadata: { name: ns } }))
    for (const n of nets) {
      yield* ignoreExists(api.create(R.NetworkAttachmentDefinitions, n.namespace, { metadata: { name: n.nad, namespace: n.namespace }, spec: { config: n.config } }))
    }
  })

export interface BulkPod {
  readonly namespace: string
  readonly name: string
  readonly attachments: ReadonlyArray<{ readonly net: Network; readonly ifname: string }>
  /** The pod's spec.nodeName (undefined: spread over node-0..49). */
  readonly nodeName?: string | undefined
}

export interface StartedPod {
  readonly namespace: string
  readonly name: string
  readonly ips: ReadonlyArray<{ readonly net: Network; readonly ifname: string; readonly ip: string }>
}

/**
 * The CNI simulation for many pods at once: the pool contents `startPod` pod by pod would leave
 * (the plugin's `assignIP`), batched: the pods with their final annotations, then one guarded
 * patch per pool, then one reservation per address.
 */
export const bulkStart = (pods: ReadonlyArray<BulkPod>, options: { readonly concurrency?: number; readonly firstIndex?: number } = {}) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const concurrency = options.concurrency ?? 16
    const first = options.firstIndex ?? 0
    // 1. Allocate in memory, pool by pool, in pod order (as sequential CNI ADDs would).
    const pools = new Map<string, { net: Network; rv: string | undefined; exists: boolean; allocations: Record<string, IPAllocation>; added: Array<string> }>()
    for (const p of pods) {
      for (const a of p.attachments) {
        if (pools.has(a.net.pool)) continue
        const got = yield* Effect.either(api.get(R.IPPools, POOL_NAMESPACE, a.net.pool))
        if (Either.isLeft(got) && got.left.reason !== "NotFound") return yield* Effect.fail(got.left)
        const allocations = Either.isRight(got) ? { ...((got.right["spec"] as { allocations?: Record<string, IPAllocation> }).allocations ?? {}) } : {}
        pools.set(a.net.pool, { net: a.net, rv: Either.isRight(got) ? got.right.metadata.resourceVersion : undefined, exists: Either.isRight(got), allocations, added: [] })
      }
    }
    const started: Array<StartedPod> = []
    for (const [i, p] of pods.entries()) {
      const ips: Array<StartedPod["ips"][number]> = []
      for (const a of p.attachments) {
        const pool = pools.get(a.net.pool)!
        const config = decodeNadConfig(a.net.config)
        if (Either.isLeft(config) || config.right._tag !== "Whereabouts") return yield* Effect.dieMessage(`bad network ${a.net.nad}`)
        const range = config.right.config.ranges[0]!
        const got = assignIP(range, parseCidr(a.net.range)!, pool.allocations, { id: hex(first + i, 64, 5), podref: `${p.namespace}/${p.name}`, ifname: a.ifname })
        if (Either.isLeft(got)) return yield* Effect.dieMessage(got.left.message)
        // The map is this function's own copy: set in place (a copy per address is quadratic in the pool's size).
        pool.allocations[got.right.key] = got.right.entry as IPAllocation
        pool.added.push(got.right.key)
        ips.push({ net: a.net, ifname: a.ifname, ip: formatIP(got.right.ip) })
      }
      started.push({ namespace: p.namespace, name: p.name, ips })
    }
    // 2. The pods, with the annotations Multus leaves on them.
    yield* Effect.forEach(
      started,
      (s, i) => {
        const networks = s.ips.map((x) => `${x.net.namespace}/${x.net.nad}@${x.ifname}`).join(",")
        const status = networkStatusFor(first + i, s.ips.map((x) => ({ network: `${x.net.namespace}/${x.net.nad}`, ifname: x.ifname, ips: [x.ip] })))
        const pod = realisticPod(s.namespace, s.name, first + i, { networks, networkStatus: status }, { forCreate: true, nodeName: pods[i]!.nodeName })
        return api.create(R.Pods, s.namespace, pod)
      },
      { concurrency, discard: true }
    )
    // 3. One guarded write per pool (chunked under the API server's 10,000-op limit).
    for (const pool of pools.values()) {
      if (!pool.exists) {
        yield* api.create(R.IPPools, POOL_NAMESPACE, { metadata: { name: pool.net.pool, namespace: POOL_NAMESPACE }, spec: { range: pool.net.range, allocations: pool.allocations } })
        continue
      }
      let rv = pool.rv
      for (let c = 0; c < pool.added.length; c += 9_000) {
        const ops: Array<JsonPatchOp> = [{ op: "test", path: "/metadata/resourceVersion", value: rv }]
        for (const k of pool.added.slice(c, c + 9_000)) ops.push({ op: "add", path: `/spec/allocations/${k}`, value: pool.allocations[k] })
        const written = yield* api.patch(R.IPPools, POOL_NAMESPACE, pool.net.pool, { type: "json", ops })
        rv = written.metadata.resourceVersion
      }
    }
    // 4. One overlapping-range reservation per address.
    yield* Effect.forEach(
      started.flatMap((s) => s.ips.map((x) => ({ s, x }))),
      ({ s, x }) =>
        api.create(R.OverlappingRangeIPReservations, POOL_NAMESPACE, {
          metadata: { name: reservationName(parseIP(x.ip)!, ""), namespace: POOL_NAMESPACE },
          spec: { podref: `${s.namespace}/${s.name}`, ifname: x.ifname }
        }),
      { concurrency, discard: true }
    )
    return started
  })

/** `pods` pods web-<i> in `ns` round-robin over `nets` (created first), and their podrefs. */
export const startPods = (ns: string, nets: ReadonlyArray<Network>, pods: number, perPod = 1, nodeName?: string) =>
  Effect.gen(function* () {
    yield* createNetworks(nets)
    const started = yield* bulkStart(roundRobin(ns, pods, nets, perPod, () => nodeName))
    return { started, refs: started.map((p) => `${p.namespace}/${p.name}`) }
  })

/** `n` pods web-<i> in `namespace`, pod i on `perPod` networks from net i on, round-robin over `nets` (so n·perPod/|nets| per pool). */
export const roundRobin = (namespace: string, n: number, nets: ReadonlyArray<Network>, perPod: number, nodeName: (i: number) => string | undefined): ReadonlyArray<BulkPod> =>
  Array.from({ length: n }, (_, i) => ({
    namespace,
    name: `web-${i}`,
    nodeName: nodeName(i),
    attachments: Array.from({ length: perPod }, (_, k) => ({ net: nets[(i + k) % nets.length]!, ifname: `net${k + 1}` }))
  }))

/** Deletes everything the controller and the CNI simulation write in the pool namespace. */
export const clearPools = Effect.gen(function* () {
  const api = yield* KubeApi
  for (const r of [R.IPPools, R.OverlappingRangeIPReservations]) {
    const { items } = yield* listAll(r, POOL_NAMESPACE)
    yield* Effect.forEach(items, (o) => api.delete(r, POOL_NAMESPACE, o.metadata.name).pipe(Effect.catchIf((e) => e.reason === "NotFound", () => Effect.void)), {
      concurrency: 16,
      discard: true
    })
  }
})

const refCounts = (o: KubeObject): Map<string, number> => {
  const out = new Map<string, number>()
  const allocations = ((o["spec"] as { allocations?: Record<string, { podref?: unknown }> } | undefined)?.allocations ?? {}) as Record<string, { podref?: unknown }>
  for (const key in allocations) {
    const ref = allocations[key]?.podref
    if (typeof ref === "string") out.set(ref, (out.get(ref) ?? 0) + 1)
  }
  return out
}

/** Watches the pool namespace's pools and reservations and timestamps, per podref, when its entries and reservations went away. */
export const makeTracker = () =>
  Effect.gen(function* () {
    const held = new Map<string, number>()
    const poolFreed = new Map<string, number>()
    const resHeld = new Map<string, number>()
    const resFreed = new Map<string, number>()
    const bump = (m: Map<string, number>, freed: Map<string, number>, ref: string, d: number) => {
      const n = (m.get(ref) ?? 0) + d
      if (n <= 0) {
        m.delete(ref)
        if (d < 0) freed.set(ref, performance.now())
      } else {
        m.set(ref, n)
        freed.delete(ref)
      }
    }
    const pools = yield* makeInformer<{ name: string; rv: string | undefined; refs: Map<string, number> }>({
      resource: R.IPPools,
      namespace: POOL_NAMESPACE,
      transform: (o) => ({ name: o.metadata.name, rv: o.metadata.resourceVersion, refs: refCounts(o) }),
      keyOf: (p) => p.name,
      versionOf: (p) => p.rv
    })
    const reservations = yield* makeInformer<{ name: string; rv: string | undefined; ref: string }>({
      resource: R.OverlappingRangeIPReservations,
      namespace: POOL_NAMESPACE,
      transform: (o) => ({ name: o.metadata.name, rv: o.metadata.resourceVersion, ref: String((o["spec"] as { podref?: unknown } | undefined)?.podref ?? "") }),
      keyOf: (r) => r.name,
      versionOf: (r) => r.rv
    })
    // Counts watch events: `until` checks its condition now and after each one.
    const events = yield* SubscriptionRef.make(0)
    const follow = <A>(queue: Queue.Dequeue<A>, f: (e: A) => void) =>
      Effect.forkScoped(Effect.forever(Queue.take(queue).pipe(Effect.map(f), Effect.zipRight(SubscriptionRef.update(events, (n) => n + 1)))))
    yield* follow(yield* pools.subscribe, (e) => {
      const before = e.type === "add" ? new Map<string, number>() : e.type === "update" ? e.old.refs : e.object.refs
      const after = e.type === "delete" ? new Map<string, number>() : e.object.refs
      for (const [ref, n] of before) if ((after.get(ref) ?? 0) !== n) bump(held, poolFreed, ref, (after.get(ref) ?? 0) - n)
      for (const [ref, n] of after) if (!before.has(ref)) bump(held, poolFreed, ref, n)
    })
    yield* follow(yield* reservations.subscribe, (e) => {
      if (e.type === "add") bump(resHeld, resFreed, e.object.ref, 1)
      else if (e.type === "delete") bump(resHeld, resFreed, e.object.ref, -1)
      else if (e.old.ref !== e.object.ref) {
        bump(resHeld, resFreed, e.old.ref, -1)
        bump(resHeld, resFreed, e.object.ref, 1)
      }
    })
    yield* pools.awaitSynced
    yield* reservations.awaitSynced
    /** Resolves when `cond` holds, or fails after the timeout. */
    const until = (cond: () => boolean, what: string, timeoutMs: number) =>
      events.changes.pipe(
        Stream.takeUntil(cond),
        Stream.runDrain,
        Effect.timeoutFail({ duration: Duration.millis(timeoutMs), onTimeout: () => new Error(`timed out after ${timeoutMs / 1000} s waiting until ${what}`) })
      )
    const total = (m: Map<string, number>, refs: ReadonlyArray<string>) => refs.reduce((a, r) => a + (m.get(r) ?? 0), 0)
    return {
      /** Pool entries held per podref, summed over pools, as the watch last showed them. */
      held: (ref: string) => held.get(ref) ?? 0,
      /** When the last pool entry of the podref went away (performance.now()), if it did. */
      poolFreedAt: (ref: string) => poolFreed.get(ref),
      reservationsOf: (ref: string) => resHeld.get(ref) ?? 0,
      reservationsFreedAt: (ref: string) => resFreed.get(ref),
      until,
      /** Resolves once `n` pool entries of `refs` are seen (fails after a minute). */
      allHeld: (refs: ReadonlyArray<string>, n: number) => until(() => total(held, refs) === n, "the tracker sees every allocation", 60_000),
      /**
       * Waits until no pool entry or reservation of `refs` is left, at most `timeoutMs`; then how long
       * after `since` the last entry and the last reservation went (NaN: not all within the timeout).
       */
      allFreed: (refs: ReadonlyArray<string>, timeoutMs: number, since = 0) =>
        Effect.map(Effect.either(until(() => total(held, refs) === 0 && total(resHeld, refs) === 0, "every address of the deleted pods is free", timeoutMs)), (done) => {
          const last = (at: Map<string, number>) => (Either.isLeft(done) ? Number.NaN : Math.max(...refs.map((r) => at.get(r) ?? since)) - since)
          return { pool: last(poolFreed), reservations: last(resFreed) }
        })
    }
  })

/** The live tier's invariants at rest (test/live/support/bulk.ts), plus the reservations counted. */
export interface RestReport extends LiveRestReport {
  readonly reservations: number
}

/** Wrong frees (a live pod's address not held for it, or held twice, or unreserved) and lost ones (held for a pod that is gone). */
export const wrongAndLost = (r: RestReport): readonly [number, number] => [r.liveNotHeld.length + r.shared.length + r.reservationMissing.length, r.deadHeld.length + r.reservationDead.length]

export const violations = (r: RestReport): number => {
  const [wrong, lost] = wrongAndLost(r)
  return wrong + lost
}

/** The invariants at rest over the API (pods of `namespace`, every pool and reservation). */
export const restCheck = (namespace: string) =>
  Effect.gen(function* () {
    const live = yield* livePodIPs(namespace)
    const pools = (yield* listAll(R.IPPools, POOL_NAMESPACE)).items.map((o) =>
      parsePool({ metadata: { name: o.metadata.name }, spec: o["spec"] as { range: string; allocations: Record<string, unknown> } })
    )
    const poolHolders = new Map(pools.flatMap((p) => p.entries.map((e) => [formatIP(e.ip), e.podref] as const)))
    const reservations = new Map(
      (yield* listAll(R.OverlappingRangeIPReservations, POOL_NAMESPACE)).items.map((o) => [o.metadata.name, String((o["spec"] as { podref?: unknown }).podref)] as const)
    )
    const found = findViolations({ live, poolHolders, reservations, inScope: (ref) => ref.startsWith(`${namespace}/`) })
    return {
      ...found,
      livePods: live.size,
      allocations: poolHolders.size,
      reservations: reservations.size
    } satisfies RestReport
  })

/** Deletes pods, 16 deletes in flight (grace 0: no kubelet here); returns when each call returned. */
export const deleteAll = (pods: ReadonlyArray<{ readonly namespace: string; readonly name: string }>) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const issued: Array<number> = []
    yield* Effect.forEach(
      pods,
      (p) =>
        Effect.suspend(() => {
          issued.push(performance.now())
          return api.delete(R.Pods, p.namespace, p.name, { gracePeriodSeconds: 0 })
        }),
      { concurrency: 16, discard: true }
    )
    return { firstIssued: issued[0] ?? performance.now(), lastReturned: performance.now() }
  })
