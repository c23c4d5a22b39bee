/**
 * Many pods at once, and the invariants of a whole namespace at rest — read back from the API
 * server: no live pod lost its address, no dead pod kept one, no address is held twice.
 */
import { PluginStore } from "../../../src/testing/PluginStore.ts"
import { randomUUID } from "node:crypto"
import { Effect, Either } from "effect"
import { addOffset, cidrAddress, formatIP, parseCidr } from "../../../src/domain/ip.ts"
import { poolName, reservationName } from "../../../src/domain/pool.ts"
import { KubeApi } from "../../../src/services/KubeApi.ts"
import * as R from "../../../src/services/resources.ts"
import { podObject } from "../../support/objects.ts"
import { poolIPs, reservationView } from "./world.ts"
import { CLEAN, type Violations, livePodIPs, violations } from "../../support/invariants.ts"

export interface Net {
  /** NAD name (in the pods' namespace), unnamed network, overlapping ranges on. */
  readonly nad: string
  readonly range: string
}

export const poolOf = (net: Net) => poolName(net.range, "")

/**
 * `count` running pods `<prefix>-<i>`, spread round-robin over `nets`, each holding the lowest
 * addresses in order — the state the CNI plugin leaves after starting them one by one (pool
 * entry, reservation, Multus network-status), written in bulk: one patch per pool.
 */
export const seedRunningPods = (namespace: string, prefix: string, nets: ReadonlyArray<Net>, count: number) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const writer = yield* PluginStore
    const pods = Array.from({ length: count }, (_, i) => {
      const net = nets[i % nets.length]!
      const base = cidrAddress(parseCidr(net.range)!)
      const ip = addOffset(base, BigInt(Math.floor(i / nets.length) + 1))!
      return { name: `${prefix}-${i}`, net, ip, key: String(Math.floor(i / nets.length) + 1), containerId: randomUUID().replaceAll("-", "") }
    })
    for (const net of nets) {
      yield* writer.createPool(poolOf(net), net.range)
      const mine = pods.filter((p) => p.net === net)
      yield* writer.updatePool(poolOf(net), (a) =>
        Either.right({ ...a, ...Object.fromEntries(mine.map((p) => [p.key, { id: p.containerId, podref: `${namespace}/${p.name}`, ifname: "net1" }])) })
      )
    }
    yield* Effect.forEach(
      pods,
      (p) =>
        Effect.gen(function* () {
          const status = JSON.stringify([
            { name: "cluster-network", interface: "eth0", ips: ["10.244.0.10"], default: true },
            { name: `${namespace}/${p.net.nad}`, interface: "net1", ips: [formatIP(p.ip)] }
          ])
          yield* api.create(R.Pods, namespace, podObject(namespace, p.name, { networks: `${namespace}/${p.net.nad}@net1`, status, nodeName: "node-1" }))
          yield* writer.createReservation(reservationName(p.ip, ""), { podref: `${namespace}/${p.name}`, ifname: "net1" })
        }),
      { concurrency: 16, discard: true }
    )
    return pods.map((p) => ({ name: p.name, ip: formatIP(p.ip), pool: poolOf(p.net) }))
  })

export interface RestReport extends Violations {
  readonly livePods: number
  readonly allocations: number
}

export { CLEAN }

/** The invariants of the pods of `namespace` over `pools` (unnamed networks), from the API server. */
export const restReport = (namespace: string, pools: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const live = yield* livePodIPs(namespace)
    const entries = new Map<string, string>()
    for (const pool of pools) for (const [ip, a] of yield* poolIPs(pool)) entries.set(ip, a.podref)
    const reservations = yield* reservationView
    const found = violations({ live, poolHolders: entries, reservations: new Map(Object.entries(reservations)), inScope: (ref) => ref.startsWith(`${namespace}/`) })
    return { ...found, livePods: live.size, allocations: entries.size } satisfies RestReport
  })
