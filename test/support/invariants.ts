/**
 * The invariants at rest, written once for the in-memory tests, the live tier and the benchmarks:
 * every live pod's status IP is held for it in its pool and has its reservation (unnamed network),
 * no IP is listed by two live pods, and nothing is held for a pod in scope that no longer exists.
 */
import { Effect, Either } from "effect"
import { parseIP } from "../../src/domain/ip.ts"
import { NETWORK_STATUS_ANNOTATION, decodeNetworkStatus } from "../../src/domain/multus.ts"
import { reservationName } from "../../src/domain/pool.ts"
import { type KubeObject, listAll } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"

/** A pod's secondary-network IPs, as its Multus network-status lists them (none when absent or unreadable). */
export const secondaryIPs = (pod: KubeObject): ReadonlyArray<string> => {
  const status = pod.metadata.annotations?.[NETWORK_STATUS_ANNOTATION]
  const decoded = status === undefined ? Either.right([]) : decodeNetworkStatus(status)
  return Either.getOrElse(decoded, () => []).filter((e) => e.default !== true).flatMap((e) => e.ips ?? [])
}

/** podref → secondary IPs of the pods of `namespace`, listed through KubeApi. */
export const livePodIPs = (namespace: string) =>
  Effect.map(listAll(R.Pods, namespace), ({ items }) => new Map(items.map((p) => [`${namespace}/${p.metadata.name}`, secondaryIPs(p)] as const)))

export interface Violations {
  /** A live pod's status IP that its pool does not hold for it (a wrong free). */
  readonly liveNotHeld: ReadonlyArray<string>
  /** A pool entry of a pod in scope that does not exist (a lost free). */
  readonly deadHeld: ReadonlyArray<string>
  /** One IP listed by two live pods. */
  readonly shared: ReadonlyArray<string>
  /** A live pod's IP without its overlapping-range reservation. */
  readonly reservationMissing: ReadonlyArray<string>
  /** A reservation of a pod in scope that does not exist (a lost free). */
  readonly reservationDead: ReadonlyArray<string>
}

/** No violation at all: what a report at rest should match. */
export const CLEAN: Violations = { liveNotHeld: [], deadHeld: [], shared: [], reservationMissing: [], reservationDead: [] }

export const violations = (input: {
  /** podref → the pod's secondary IPs from its network-status. */
  readonly live: ReadonlyMap<string, ReadonlyArray<string>>
  /** IP text → the podref its pool entry holds it for. */
  readonly poolHolders: ReadonlyMap<string, string>
  /** reservation name → its podref. */
  readonly reservations: ReadonlyMap<string, string>
  /** Which podrefs a dead-pod check covers (default: all). */
  readonly inScope?: (ref: string) => boolean
}): Violations => {
  const { live, poolHolders, reservations } = input
  const inScope = input.inScope ?? (() => true)
  const owners = new Map<string, string>()
  const liveNotHeld: Array<string> = []
  const shared: Array<string> = []
  const reservationMissing: Array<string> = []
  for (const [ref, ips] of live) {
    for (const ip of ips) {
      if (owners.has(ip)) shared.push(`${ip}: ${owners.get(ip)} and ${ref}`)
      owners.set(ip, ref)
      const held = poolHolders.get(ip)
      if (held !== ref) liveNotHeld.push(`${ref} ${ip} (pool: ${held ?? "free"})`)
      const parsed = parseIP(ip)
      if (parsed === undefined || reservations.get(reservationName(parsed, "")) !== ref) reservationMissing.push(`${ref} ${ip}`)
    }
  }
  const deadHeld = [...poolHolders].filter(([, ref]) => inScope(ref) && !live.has(ref)).map(([ip, ref]) => `${ip} ${ref}`)
  const reservationDead = [...reservations].filter(([, ref]) => inScope(ref) && !live.has(ref)).map(([n, ref]) => `${n} ${ref}`)
  return { liveNotHeld, deadHeld, shared, reservationMissing, reservationDead }
}
