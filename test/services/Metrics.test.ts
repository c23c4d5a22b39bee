import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { FLOW_KINDS } from "../../src/domain/api-flow.ts"
import { FREE_TRIGGERS } from "../../src/domain/release.ts"
import * as Metrics from "../../src/services/Metrics.ts"
import { valueIn } from "../../src/testing/prom.ts"

const P = "whereabouts_controller_"

describe("Metrics", () => {
  it.effect("a batch freed is observed under its name and, for one more release, under its former one", () =>
    Effect.gen(function* () {
      const m = Metrics.make()
      yield* m.freeBatchDuration(0.2)
      expect([yield* valueIn(m, "free_batch_duration_seconds_count"), yield* valueIn(m, "reconcile_duration_seconds_count")]).toEqual([1, 1])
      expect((yield* m.render).body).toContain(`# HELP ${P}reconcile_duration_seconds Deprecated: free_batch_duration_seconds`)
    })
  )

  // An alert on increase() or rate() sees an increment only against an earlier sample: a series
  // born at 1 hides its first event (deploy/components/monitoring's give-up and failed-sweep alerts).
  it.effect("exposes the series alerts and the dashboard read at 0 before anything happened", () =>
    Effect.gen(function* () {
      const { body } = yield* Metrics.make().render
      const zero = (name: string, labels: Record<string, string>) =>
        `${P}${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(",")}} 0`
      const lines = new Set(body.split("\n"))
      const want = [
        zero("failures_total", { reason: "RetriesExhausted" }),
        zero("sweeps_total", { result: "failure" }),
        zero("sweeps_total", { result: "success" }),
        ...FREE_TRIGGERS.flatMap((trigger) => [zero("ips_freed_total", { trigger }), zero("reservations_deleted_total", { trigger })]),
        ...["queued", "written", "failed", "dropped"].map((result) => zero("events_total", { result })),
        ...FLOW_KINDS.flatMap((kind) => [zero("api_pauses_total", { kind }), zero("api_paused_seconds_total", { kind })])
      ]
      expect(want.filter((l) => !lines.has(l))).toEqual([])
      expect(FREE_TRIGGERS).toContain("node-gone")
    })
  )

  it.effect("counts from those zeros", () =>
    Effect.gen(function* () {
      const m = Metrics.make()
      yield* m.failure("RetriesExhausted")
      yield* m.sweep("failure")
      yield* m.ipsFreed("terminal", 3)
      expect([
        yield* valueIn(m, "failures_total", { reason: "RetriesExhausted" }),
        yield* valueIn(m, "sweeps_total", { result: "failure" }),
        yield* valueIn(m, "ips_freed_total", { trigger: "terminal" }),
        yield* valueIn(m, "ips_freed_total", { trigger: "deletion" })
      ]).toEqual([1, 1, 3, 0])
    })
  )

  it.effect("drops the pool and orphan gauges when the lease is lost: only the leader measures them", () =>
    Effect.gen(function* () {
      const m = Metrics.make()
      yield* m.leader(true)
      yield* m.pools([{ pool: "10.0.0.0-24", size: 254, used: 10, free: 244 }], 0.85)
      yield* m.orphans("allocation", 2, false)
      expect([yield* valueIn(m, "pool_used", { pool: "10.0.0.0-24" }), yield* valueIn(m, "orphans", { kind: "allocation" })]).toEqual([10, 2])
      yield* m.leader(false)
      expect([yield* valueIn(m, "pool_used", { pool: "10.0.0.0-24" }), yield* valueIn(m, "orphans", { kind: "allocation" }), yield* valueIn(m, "leader")]).toEqual([undefined, undefined, 0])
    })
  )
  it.effect("informer_restarts_total is each informer's own count, read at the scrape (nodes and node-slice pools too)", () =>
    Effect.gen(function* () {
      const m = Metrics.make()
      const counts = { pods: 0, nodes: 0, nodeslicepools: 0 }
      yield* m.informersAtScrape(Object.keys(counts).map((plural) => ({ resource: { plural }, restarts: () => counts[plural as keyof typeof counts] })))
      const restarts = (resource: string) => valueIn(m, "informer_restarts_total", { resource })
      expect(yield* restarts("pods")).toBe(0)
      counts.nodes = 2
      counts.nodeslicepools = 1
      expect([yield* restarts("nodes"), yield* restarts("nodeslicepools"), yield* restarts("pods")]).toEqual([2, 1, 0])
      counts.nodes = 3
      expect([yield* restarts("nodes"), yield* restarts("nodeslicepools")]).toEqual([3, 1])
    })
  )

  it.effect("the work queue's depth and in-flight gauges are read at the scrape while the loop's scope lasts, then read 0", () =>
    Effect.gen(function* () {
      const m = Metrics.make()
      const queue = { depth: 4, inFlight: 2 }
      const gauges = Effect.all([valueIn(m, "workqueue_depth"), valueIn(m, "workqueue_in_flight")])
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* m.queueAtScrape(Effect.sync(() => [queue.depth, queue.inFlight] as const))
          expect(yield* gauges).toEqual([4, 2])
          queue.depth = 0
          expect(yield* gauges).toEqual([0, 2])
        })
      )
      expect(yield* gauges).toEqual([0, 0])
    })
  )
})
