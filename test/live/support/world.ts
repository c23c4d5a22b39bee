/**
 * The live world of the end-to-end tier: a KubeApi + the project's stores over the harness's
 * API server (so `startPod`, the project's allocator acting as the CNI plugin, writes the
 * pools), raw REST for what KubeApi does not do (subresources, TokenRequest), readers of
 * pools, reservations, Events and Leases, and bounded polling.
 */
import { isDeepStrictEqual } from "node:util"
import { Duration, Effect, Either, Layer } from "effect"
import { formatIP } from "../../../src/domain/ip.ts"
import { parsePool } from "../../../src/domain/pool.ts"
import { ControllerConfig, layerWith } from "../../../src/services/ControllerConfig.ts"
import { KubeApi, type KubeObject, listAll } from "../../../src/services/KubeApi.ts"
import * as R from "../../../src/services/resources.ts"
import { liveKubeApi, runningEnvtest } from "../../support/live.ts"
import { type Credentials, credentialsOf, restOk } from "./rest.ts"
import { namespaceObject } from "../../support/objects.ts"
import { createNad, eventsIn, type SeenEvent } from "../../support/world.ts"
import { simulationStores } from "../../../src/testing/layers.ts"

// ---------------------------------------------------------------------------------------------
// Layers

/**
 * KubeApi over the harness (admin), plus the pool/reservation stores the CNI plugin uses, with
 * `namespace` as the whereabouts namespace. No client-side rate limit: the tests are the load.
 */
export const liveWorld = (namespace: string, kubeconfig?: string) => {
  const overrides = { namespace, apiQps: 0, requestTimeout: Duration.seconds(20), ...(kubeconfig === undefined ? {} : { kubeconfig }) }
  const config = layerWith({ kubeconfig: runningEnvtest().kubeconfigPath, ...overrides })
  return simulationStores.pipe(Layer.provideMerge(liveKubeApi(overrides)), Layer.provideMerge(config))
}

export type LiveWorld = Layer.Layer.Success<ReturnType<typeof liveWorld>>

// ---------------------------------------------------------------------------------------------
// Raw REST (rest.ts; the harness's admin credentials)

export { type Credentials, credentialsOf, rest, restOk } from "./rest.ts"

export const adminCredentials = (): Credentials => credentialsOf(runningEnvtest().kubeconfigPath)

// ---------------------------------------------------------------------------------------------
// Changing the world

export const ensureNamespace = (name: string, labels?: Record<string, string>) =>
  Effect.flatMap(KubeApi, (api) =>
    api
      .create(R.Namespaces, undefined, labels === undefined ? namespaceObject(name) : { ...namespaceObject(name), metadata: { name, labels } })
      .pipe(Effect.catchIf((e) => e.reason === "AlreadyExists", () => Effect.void), Effect.asVoid)
  )


export { on } from "../../support/objects.ts"

/** Sets `status.phase` as a kubelet would (through the status subresource). */
export const setPhase = (namespace: string, name: string, phase: "Running" | "Pending" | "Succeeded" | "Failed") =>
  restOk(adminCredentials(), "PATCH", `/api/v1/namespaces/${namespace}/pods/${name}/status`, { status: { phase } }, [200], "application/merge-patch+json")

/** Merges into a pod's status as the kubelet or a controller would (the status subresource). */
export const patchPodStatus = (namespace: string, name: string, status: Record<string, unknown>) =>
  restOk(adminCredentials(), "PATCH", `/api/v1/namespaces/${namespace}/pods/${name}/status`, { status }, [200], "application/merge-patch+json")

// ---------------------------------------------------------------------------------------------
// Reading the world back (always from the API server)

export interface Allocation {
  readonly podref: string
  readonly id: string
  readonly ifname: string | undefined
  readonly key: string
}

/** IP text → allocation of a pool (empty when the pool does not exist). */
export const poolIPs = (pool: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const { namespace } = yield* ControllerConfig
    const got = yield* Effect.either(api.get(R.IPPools, namespace, pool))
    if (Either.isLeft(got)) {
      if (got.left.reason === "NotFound") return new Map<string, Allocation>()
      return yield* Effect.fail(got.left)
    }
    const spec = got.right["spec"] as { range: string; allocations: Record<string, unknown> }
    const parsed = parsePool({ metadata: { name: pool }, spec })
    return new Map(parsed.entries.map((e) => [formatIP(e.ip), { podref: e.podref, id: e.id, ifname: e.ifname, key: e.key }] as const))
  })

/** `ip → podref` of a pool, as a plain sorted object (readable in assertion diffs). */
export const poolView = (pool: string) =>
  Effect.map(poolIPs(pool), (m) => Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true })).map(([ip, a]) => [ip, a.podref])))

/** Reservation name → podref, in the whereabouts namespace. */
export const reservationView = Effect.gen(function* () {
  const { namespace } = yield* ControllerConfig
  const { items } = yield* listAll(R.OverlappingRangeIPReservations, namespace)
  return Object.fromEntries(items.map((o) => [o.metadata.name, (o["spec"] as { podref: string }).podref] as const).sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true })))
})

const byAddress = <V>(entries: Iterable<readonly [string, V]>): Record<string, V> =>
  Object.fromEntries([...entries].sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true })))

/** `ip → {podref, id, ifname}` of a pool: every field of every entry, for exact end states. */
export const poolEntries = (pool: string) =>
  Effect.map(poolIPs(pool), (m) =>
    byAddress([...m].map(([ip, a]) => [ip, { podref: a.podref, id: a.id, ...(a.ifname === undefined ? {} : { ifname: a.ifname }) }] as const))
  )

/** Reservation name → its whole spec (as written: upstream's carry no containerid), names starting with `prefix`. */
export const reservationSpecs = (prefix = "") =>
  Effect.gen(function* () {
    const { namespace } = yield* ControllerConfig
    const { items } = yield* listAll(R.OverlappingRangeIPReservations, namespace)
    return byAddress(
      items.filter((o) => o.metadata.name.startsWith(prefix)).map((o) => [o.metadata.name, o["spec"] as Readonly<Record<string, string>>] as const)
    )
  })

export { createNad, eventsIn, type SeenEvent }

/** `type reason name: message` lines, sorted: compact and exact in assertion diffs. */
export const eventLines = (namespace: string, filter: (e: SeenEvent) => boolean = () => true) =>
  Effect.map(eventsIn(namespace), (es) => es.filter(filter).map((e) => `${e.type} ${e.reason} ${e.name}: ${e.message}`).sort())

export const gcMessage = (ip: string, network: string) => `successful cleanup of IP address [${ip}] from network ${network}`

/** The Lease's holder ("" when released, undefined when there is no Lease). */
export const leaseHolder = (namespace: string, name = "whereabouts-gc") =>
  Effect.flatMap(KubeApi, (api) =>
    api.get(R.Leases, namespace, name).pipe(
      Effect.map((l: KubeObject) => String((l["spec"] as { holderIdentity?: string } | undefined)?.holderIdentity ?? "")),
      Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed(undefined))
    )
  )

// ---------------------------------------------------------------------------------------------
// Waiting (bounded polling; a timeout fails with what was last seen)

export const WAIT = Duration.seconds(20)

/**
 * Polls `probe` every `interval` until `ok` holds for its value; fails after `timeout` with the
 * last value (or error) it saw, and `context()` (a controller's log tail, say).
 */
export const waitUntil = <A, E, R>(
  what: string,
  probe: Effect.Effect<A, E, R>,
  ok: (a: A) => boolean,
  options: {
    readonly timeout?: Duration.DurationInput
    readonly interval?: Duration.DurationInput
    /** Shown with a timeout (a controller's log tail, say). */
    readonly context?: () => string
    /** A reason to stop waiting at once (the controller exited, say). */
    readonly abort?: () => string | undefined
  } = {}
): Effect.Effect<A, Error, R> =>
  Effect.gen(function* () {
    const timeout = Duration.toMillis(Duration.decode(options.timeout ?? WAIT))
    const deadline = Date.now() + timeout
    let last: unknown = "(nothing yet)"
    for (;;) {
      const why = options.abort?.()
      if (why !== undefined) return yield* Effect.fail(new Error(`gave up waiting until ${what}: ${why}`))
      const got = yield* Effect.either(probe)
      if (Either.isRight(got)) {
        if (ok(got.right)) return got.right
        last = got.right
      } else last = got.left
      if (Date.now() > deadline) {
        const shown = (() => {
          try {
            return JSON.stringify(last, (_k, v: unknown) => (v instanceof Map ? Object.fromEntries(v) : typeof v === "bigint" ? v.toString() : v), 1)
          } catch {
            return String(last)
          }
        })()
        const extra = options.context === undefined ? "" : `\n--- context\n${options.context()}`
        return yield* Effect.fail(new Error(`timed out after ${timeout / 1000} s waiting until ${what}; last seen: ${shown}${extra}`))
      }
      yield* Effect.sleep(options.interval ?? "200 millis")
    }
  })

/** Waits until `probe` yields a value deep-equal to `expected` (key order aside). */
export const waitForEqual = <A, E, R>(what: string, probe: Effect.Effect<A, E, R>, expected: A, options: Parameters<typeof waitUntil>[3] = {}) =>
  waitUntil(what, probe, (a) => isDeepStrictEqual(a, expected), options)

/** Waits until `probe` yields a value deep-equal (as JSON) to `expected`. */
export const waitForValue = <A, E, R>(what: string, probe: Effect.Effect<A, E, R>, expected: A, options: Parameters<typeof waitUntil>[3] = {}) => {
  const want = JSON.stringify(expected)
  return waitUntil(what, probe, (a) => JSON.stringify(a) === want, options)
}
