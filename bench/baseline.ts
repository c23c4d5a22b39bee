/**
 * The naive baseline (the design of whereabouts' ip-control-loop and its like) over the
 * controller's KubeApi, EventRecorder and rate limiter: whole pod objects cached; per deleted pod,
 * per secondary IP of its network-status: GET the pool, patch the entry away guarded by
 * `test /metadata/resourceVersion` (on a conflict, again), delete the reservation, record the
 * Event; as many workers as the controller, one pod each. `node bench/baseline.ts run` reads the
 * controller's environment variables.
 */
import { Cause, Effect, Either, Exit, Fiber, Layer, Logger, LogLevel, Option, Queue } from "effect"
import { type IPAddress, cidrContains, parseCidr, parseIP } from "../src/domain/ip.ts"
import { NETWORK_STATUS_ANNOTATION, decodeNetworkStatus, statusAttachment } from "../src/domain/multus.ts"
import { poolName, reservationName } from "../src/domain/pool.ts"
import { serveEndpoints } from "../src/programs/http.ts"
import { toNadRecord, type NadRecord } from "../src/services/Caches.ts"
import * as ControllerConfig from "../src/services/ControllerConfig.ts"
import * as EventRecorder from "../src/services/EventRecorder.ts"
import { REASON_GARBAGE_COLLECTED, garbageCollectedMessage } from "../src/services/EventRecorder.ts"
import { makeInformer } from "../src/services/Informer.ts"
import { instrument } from "../src/services/ApiFlow.ts"
import { KubeApi, type KubeObject } from "../src/services/KubeApi.ts"
import { layerLive } from "../src/services/KubeApiLive.ts"
import type { KubeError } from "../src/services/KubeError.ts"
import * as Metrics from "../src/services/Metrics.ts"
import * as NadConfigs from "../src/services/NadConfigs.ts"
import * as R from "../src/services/resources.ts"
import * as WorkQueue from "../src/services/WorkQueue.ts"

/** Upstream retries a contended pool this many times. */
const RETRIES = 100

const keyOf = (o: KubeObject) => `${o.metadata.namespace ?? ""}/${o.metadata.name}`

/** GET + guarded patch of one entry, retried on conflict; true when this call removed it. */
const freeOne = (pool: string, addr: IPAddress, podref: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const { namespace } = yield* ControllerConfig.ControllerConfig
    for (let attempt = 0; attempt < RETRIES; attempt++) {
      const got = yield* Effect.either(api.get(R.IPPools, namespace, pool))
      if (Either.isLeft(got)) {
        if (got.left.reason === "NotFound") return false
        return yield* Effect.fail(got.left)
      }
      const spec = got.right["spec"] as { range?: string; allocations?: Record<string, { podref?: string }> }
      const cidr = parseCidr(spec.range ?? "")
      if (cidr === undefined) return false
      const key = (addr.value - cidr.address).toString()
      if (spec.allocations?.[key]?.podref !== podref) return false
      const patched = yield* Effect.either(
        api.patch(R.IPPools, namespace, pool, {
          type: "json",
          ops: [
            { op: "test", path: "/metadata/resourceVersion", value: got.right.metadata.resourceVersion },
            { op: "remove", path: `/spec/allocations/${key}` }
          ]
        })
      )
      if (Either.isRight(patched)) return true
      if (patched.left.reason !== "Invalid" && patched.left.reason !== "Conflict") return yield* Effect.fail(patched.left)
      yield* Effect.sleep(`${1 + Math.floor(Math.random() * 5)} millis`)
    }
    return yield* Effect.fail(new Error(`pool ${pool} stayed contended`))
  })

/** Frees what one deleted pod held, IP by IP. */
const processPod = (pod: KubeObject, nads: (key: string) => Option.Option<NadRecord>) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const config = yield* ControllerConfig.ControllerConfig
    const nadConfigs = yield* NadConfigs.NadConfigs
    const events = yield* EventRecorder.EventRecorder
    const metrics = yield* Metrics.Metrics
    const namespace = pod.metadata.namespace ?? ""
    const podref = `${namespace}/${pod.metadata.name}`
    const status = pod.metadata.annotations?.[NETWORK_STATUS_ANNOTATION]
    if (status === undefined) return
    const entries = decodeNetworkStatus(status)
    if (Either.isLeft(entries)) return
    let freed = 0
    let reservations = 0
    for (const entry of entries.right) {
      if (entry.default === true) continue
      const att = statusAttachment(entry, namespace)
      const nad = nads(`${att.namespace}/${att.name}`)
      if (Option.isNone(nad)) continue
      const decoded = nadConfigs.decode(nad.value)
      if (Either.isLeft(decoded) || decoded.right._tag !== "Whereabouts") continue
      const ipam = decoded.right.config
      for (const text of entry.ips ?? []) {
        const ip = parseIP(text.includes("/") ? text.slice(0, text.indexOf("/")) : text)
        const range = ip === undefined ? undefined : ipam.ranges.find((r) => cidrContains(r.cidr, ip))
        if (ip === undefined || range === undefined) continue
        const done = yield* freeOne(poolName(range.range, ipam.networkName), ip, podref)
        if (!done) continue
        freed++
        if (ipam.enableOverlappingRanges) {
          const deleted = yield* api.delete(R.OverlappingRangeIPReservations, config.namespace, reservationName(ip, ipam.networkName)).pipe(
            Effect.as(true),
            Effect.catchIf((e: KubeError) => e.reason === "NotFound", () => Effect.succeed(false))
          )
          if (deleted) reservations++
        }
        yield* events.record({ kind: "Pod", namespace, name: pod.metadata.name, uid: pod.metadata.uid ?? "" }, "Normal", REASON_GARBAGE_COLLECTED, garbageCollectedMessage(text, nad.value.name))
      }
    }
    yield* metrics.ipsFreed("deletion", freed)
    yield* metrics.reservationsDeleted("deletion", reservations)
  })

/** Starts the baseline controller in the current scope (informers, queue, workers); whether its caches are synced. */
const startBaseline = Effect.gen(function* () {
  const config = yield* ControllerConfig.ControllerConfig
  const pods = yield* makeInformer<KubeObject>({
    resource: R.Pods,
    transform: (o) => o,
    keyOf,
    identityOf: (o) => o.metadata.uid ?? "",
    versionOf: (o) => o.metadata.resourceVersion,
    pageSize: config.pageSize
  })
  const nads = yield* makeInformer<NadRecord>({
    resource: R.NetworkAttachmentDefinitions,
    transform: toNadRecord,
    keyOf: (n) => `${n.namespace}/${n.name}`,
    versionOf: (n) => n.resourceVersion,
    pageSize: config.pageSize
  })
  const deletions = yield* pods.subscribe
  const queue = yield* WorkQueue.make<KubeObject>({})
  yield* Effect.forkScoped(
    Effect.forever(Effect.flatMap(Queue.take(deletions), (e) => (e.type === "delete" ? queue.add(`${keyOf(e.object)}/${e.object.metadata.uid ?? ""}`, e.object) : Effect.void)))
  )
  yield* Effect.zipRight(pods.awaitSynced, nads.awaitSynced)
  const worker = Effect.gen(function* () {
    for (;;) {
      const item = yield* queue.takeBatch(1)
      if (Option.isNone(item)) return
      const { key, value } = item.value[0]!
      const out = yield* Effect.either(processPod(value, nads.get))
      if (Either.isLeft(out)) {
        yield* Effect.logWarning(`baseline: ${key}: ${out.left.message}`)
        yield* queue.addRateLimited(key, value)
      } else yield* queue.forget(key)
      yield* queue.done(key)
    }
  })
  for (let i = 0; i < config.concurrentBatches; i++) yield* Effect.forkScoped(worker)
  return Effect.map(Effect.all([pods.isSynced, nads.isSynced]), ([a, b]) => a && b)
})

if (process.argv[2] !== "run") {
  process.stderr.write("usage: node bench/baseline.ts run   (configured like the controller, by environment)\n")
  process.exit(2)
}
// The KubeApi metrics-counted, as the controller's is.
const env = EventRecorder.layer.pipe(Layer.provideMerge(instrument(layerLive)), Layer.provideMerge(Metrics.layer), Layer.provideMerge(Layer.provideMerge(NadConfigs.layer, ControllerConfig.layer)))
const program = Effect.scoped(
  Effect.gen(function* () {
    yield* serveEndpoints(yield* startBaseline)
    yield* Effect.logInfo("baseline running")
    return yield* Effect.never
  })
).pipe(Effect.provide(env), Effect.provide(Logger.json), Logger.withMinimumLogLevel(LogLevel.Warning))
const fiber = Effect.runFork(program as Effect.Effect<never, unknown>)
process.on("SIGTERM", () => Effect.runFork(Fiber.interrupt(fiber)))
// A failure (bad configuration, no API server) must show in the contender's log and exit code.
fiber.addObserver((exit) => {
  if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) {
    process.stderr.write(`baseline failed: ${Cause.pretty(exit.cause)}\n`)
    process.exit(1)
  }
  process.exit(0)
})
