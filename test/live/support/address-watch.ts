/**
 * The invariants of a lifecycle on real controllers, judged against what the node agents run (the
 * truth of which pod uses which address) and what the API server holds:
 *
 * - at rest (test/support/invariants.ts): every pod an agent runs has its addresses held for it in
 *   its pool and reserved; nothing is held or reserved for a pod of the namespace no agent runs
 *   (gone, finished, evicted); no address is listed by two running pods;
 * - throughout (watchAddresses): no running pod ever lost an address. Each round reads which pods
 *   run (the agents) and exist (the API server), then the pools and reservations, then both again;
 *   a pod of the same uid running and existing before and after ran all along, so its addresses
 *   must have been held for it and reserved when the pools were read. A pod of a dead node does
 *   not count: nobody can tell whether it still runs, and freeing it is the controller's call.
 */
import { type Duration, Effect, Fiber, type Scope } from "effect"
import { parseIP } from "../../../src/domain/ip.ts"
import { reservationName } from "../../../src/domain/pool.ts"
import type { ControllerConfig } from "../../../src/services/ControllerConfig.ts"
import type { KubeApi } from "../../../src/services/KubeApi.ts"
import { CLEAN, type Violations, violations } from "../../support/invariants.ts"
import { type Kubernetes, podsOf } from "./kubernetes.ts"
import { poolIPs, reservationView, waitUntil } from "./world.ts"

export { CLEAN }

interface Running {
  readonly ref: string
  readonly ips: ReadonlyArray<string>
}

/** uid → the pod and every address it runs on, over the agents of live nodes. */
const runningNow = (k8s: Kubernetes, namespace: string): ReadonlyMap<string, Running> =>
  new Map(
    k8s.agents
      .flatMap((a) => a.running())
      .filter((p) => p.ref.startsWith(`${namespace}/`))
      .map((p) => [p.uid, { ref: p.ref, ips: p.ips.flatMap((i) => i.ips) }] as const)
  )

/** IP → the podref its pool entry names, across `pools`. */
const holders = (pools: ReadonlyArray<string>) =>
  Effect.map(Effect.forEach(pools, poolIPs), (maps) => new Map(maps.flatMap((m) => [...m].map(([ip, a]) => [ip, a.podref] as const))))

/**
 * The invariants at rest of the pods of `namespace` over `pools` (unnamed networks), once the
 * agents and the API server agree on which pods run: every pod of the namespace that has not
 * finished is run by an agent (same uid), and the agents run no pod that is gone. Until they
 * agree, `disagree` lists the pods in question.
 */
export const restViolations = (k8s: Kubernetes, namespace: string, pools: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const running = runningNow(k8s, namespace)
    const pods = yield* podsOf(k8s.admin, namespace)
    const disagree = [
      ...pods.filter((p) => !["Succeeded", "Failed"].includes(p.phase) && !running.has(p.uid)).map((p) => `${p.name} (${p.phase || "no phase"}) not run by an agent`),
      ...[...running].filter(([uid]) => !pods.some((p) => p.uid === uid)).map(([, p]) => `${p.ref} run by an agent but gone`)
    ]
    const live = new Map([...running.values()].map((p) => [p.ref, p.ips] as const))
    const poolHolders = yield* holders(pools)
    const reservations = new Map(Object.entries(yield* reservationView))
    return { disagree, ...violations({ live, poolHolders, reservations, inScope: (ref) => ref.startsWith(`${namespace}/`) }) }
  })

const AT_REST = JSON.stringify({ disagree: [], ...CLEAN })

/** Waits until the invariants hold at rest (the controller frees within its batch window and retries); answers the violations then. */
export const awaitClean = (k8s: Kubernetes, namespace: string, pools: ReadonlyArray<string>, timeout: Duration.DurationInput = "60 seconds"): Effect.Effect<Violations, Error, KubeApi | ControllerConfig> =>
  Effect.map(
    waitUntil("the agents and the API server agree and the invariants hold at rest", restViolations(k8s, namespace, pools), (v) => JSON.stringify(v) === AT_REST, { context: k8s.context, timeout }),
    ({ disagree: _, ...v }) => v
  )

export interface AddressWatch {
  /** Each time a running pod's address was not held for it or not reserved, once per pod, address and kind. */
  readonly lost: () => ReadonlyArray<string>
  readonly rounds: () => number
}

/** Rounds until the scope closes; read `lost()` at the end of the test. */
export const watchAddresses = (k8s: Kubernetes, namespace: string, pools: ReadonlyArray<string>): Effect.Effect<AddressWatch, never, KubeApi | ControllerConfig | Scope.Scope> =>
  Effect.gen(function* () {
    const lost = new Set<string>()
    let rounds = 0
    const round = Effect.gen(function* () {
      const [runBefore, podsBefore] = [runningNow(k8s, namespace), yield* podsOf(k8s.admin, namespace)]
      const held = yield* holders(pools)
      const reserved = yield* reservationView
      const [runAfter, podsAfter] = [runningNow(k8s, namespace), yield* podsOf(k8s.admin, namespace)]
      const existed = (uid: string) => podsBefore.some((p) => p.uid === uid) && podsAfter.some((p) => p.uid === uid)
      for (const [uid, pod] of runBefore) {
        if (!runAfter.has(uid) || !existed(uid)) continue
        for (const ip of pod.ips) {
          if (held.get(ip) !== pod.ref) lost.add(`${pod.ref} (uid ${uid}) runs on ${ip}, which its pool ${held.has(ip) ? `holds for ${held.get(ip)}` : "does not hold"}`)
          const parsed = parseIP(ip)
          const name = parsed === undefined ? ip : reservationName(parsed, "")
          if (reserved[name] !== pod.ref) lost.add(`${pod.ref} (uid ${uid}) runs on ${ip}, whose reservation ${name} ${reserved[name] === undefined ? "does not exist" : `names ${reserved[name]}`}`)
        }
      }
      rounds++
    })
    const fiber = yield* Effect.forkScoped(Effect.forever(Effect.ignore(round).pipe(Effect.zipRight(Effect.sleep("250 millis")))))
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
    return { lost: () => [...lost], rounds: () => rounds }
  })
