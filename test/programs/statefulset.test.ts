import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { memory } from "../../src/testing/layers.ts"
import { CLEAN, on, poolState, restReport, startDeletionLoop, statefulSet } from "../support/controller.ts"
import { eventually, require } from "../support/eventually.ts"
import { createNad } from "../support/world.ts"

const NS = "default"

/**
 * StatefulSet scale deltas issued back to back, with the deletion loop running: scale-down
 * deletes the highest ordinals without CNI DEL, scale-up re-creates the same names right away, so
 * the controller's release races the plugin's idempotent re-ADD of a reborn pod of the same name.
 */
const scaleStorm = (pool: string, range: string, deltas: ReadonlyArray<number>, initial: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      yield* createNad(NS, "net1", { range })
      yield* startDeletionLoop()
      const web = statefulSet("web", [on("net1")])
      yield* web.scaleTo(initial)
      for (const delta of deltas) yield* web.scaleTo(web.replicas() + delta)
      const replicas = web.replicas()
      expect(replicas).toBe(initial + deltas.reduce((a, b) => a + b, 0))

      yield* eventually(
        Effect.flatMap(restReport(pool), (r) => require(() => r.deadHeld.length === 0 && r.reservationDead.length === 0, `not at rest: ${JSON.stringify(r)}`)),
        "20 seconds"
      )
      const report = yield* restReport(pool)
      expect(report).toMatchObject(CLEAN)
      expect(report.allocations).toBe(replicas)
      // One allocation per live pod: its network-status IP, under its current container id.
      const entries = yield* poolState(pool)
      const ips = web.pods().map((p) => p.ips[0]!.ips[0]!)
      expect(new Set(ips).size).toBe(replicas)
      for (const p of web.pods()) expect(entries.get(p.ips[0]!.ips[0]!)).toEqual({ podref: `${NS}/${p.name}`, id: p.containerId, ifname: "net1" })
      expect([...entries.values()].map((e) => e.podref).sort()).toEqual(web.pods().map((p) => `${NS}/${p.name}`).sort())
    })
  ).pipe(Effect.provide(memory({ concurrentBatches: 4, namespace: "kube-system", retryBaseDelay: Duration.millis(5) })))

describe("StatefulSet scale deltas", () => {
  it.live("+5/−5, −10/+10, +20/−20 back to back from 10 replicas: at rest one allocation per live pod", () =>
    scaleStorm("10.120.0.0-24", "10.120.0.0/24", [5, -5, -10, 10, 20, -20], 10))

  it.live("the same storm three times over in a small /26 (addresses reused as soon as they are freed)", () =>
    scaleStorm("10.121.0.0-26", "10.121.0.0/26", [5, -5, -10, 10, 20, -20, 5, -5, -10, 10, 20, -20, 5, -5, -10, 10, 20, -20], 10))

  it.live("scale to zero and back, repeatedly: names come back before their old incarnation is reconciled", () =>
    scaleStorm("10.122.0.0-27", "10.122.0.0/27", [-10, 10, -10, 10, -10, 10, -10, 10], 10))
})
