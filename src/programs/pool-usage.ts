/**
 * Pool usage from the IPPool cache: size/used/free gauges for every pool, and a Warning event on
 * the IPPool (plus a gauge) when its usage crosses the threshold, before pods start hanging.
 */
import { Effect, Schedule } from "effect"
import { atOrOver } from "../domain/capacity.ts"
import type { Snapshot } from "../domain/holdings.ts"
import type { ParsedPool } from "../domain/pool.ts"
import { Caches } from "../services/Caches.ts"
import { changeStamp } from "../services/Informer.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { EventRecorder, REASON_POOL_NEARLY_FULL } from "../services/EventRecorder.ts"
import { Metrics } from "../services/Metrics.ts"
import { cacheSnapshot } from "./snapshot.ts"

/** A pool's size (from its NADs' configs, else its range), its entries, and the addresses left within the size. */
export const usageOf = (snapshot: Pick<Snapshot, "capacity">, pool: ParsedPool) => {
  const capacity = snapshot.capacity(pool)
  return { size: capacity.size, sizeFrom: capacity.from, used: pool.entries.length, free: Math.max(0, capacity.size - capacity.usedWithin) }
}

export const poolNearlyFullMessage = (pool: string, used: number, size: number, threshold: number): string =>
  `IPPool ${pool} is ${Math.round((used / size) * 100)}% used (${used} of ${size} addresses), at or over the ${Math.round(threshold * 100)}% threshold`

/**
 * Checks every `interval`, once one of the caches usage is read from (pools, NADs, node-slice pools)
 * has changed since the last check; warns once per crossing (again only after dropping below).
 */
export const monitorPoolUsage = (interval: Schedule.Schedule<unknown> = Schedule.spaced("10 seconds")) =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const { poolUsageThreshold: threshold, namespace } = yield* ControllerConfig
    const metrics = yield* Metrics
    const events = yield* EventRecorder
    const over = new Set<string>()
    let checked: string | undefined
    const check = Effect.gen(function* () {
      const stamp = changeStamp([caches.pools, caches.nads, caches.nodeSlicePools])
      if (stamp === checked) return
      checked = stamp
      const snapshot = yield* cacheSnapshot
      const usage = caches.pools.values().map((p) => ({ uid: p.uid, pool: p.name, ...usageOf(snapshot, p.pool) }))
      yield* metrics.pools(usage, threshold)
      for (const u of usage) {
        if (!atOrOver(u, threshold)) over.delete(u.pool)
        else if (!over.has(u.pool)) {
          over.add(u.pool)
          const message = poolNearlyFullMessage(u.pool, u.size - u.free, u.size, threshold)
          yield* events.record({ kind: "IPPool", namespace, name: u.pool, uid: u.uid }, "Warning", REASON_POOL_NEARLY_FULL, message)
        }
      }
    })
    yield* Effect.repeat(check, interval)
  })
