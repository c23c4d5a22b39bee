import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { carryRestarts } from "../../src/programs/run.ts"
import * as Metrics from "../../src/services/Metrics.ts"
import { metric } from "../../src/testing/prom.ts"

const fake = (plural: string) => {
  let n = 0
  return { resource: { plural }, restarts: () => n, restart: () => void n++ }
}

describe("informer_restarts_total", () => {
  it.effect("carries each informer's new restarts into the counter, every informer the controller runs (nodes and node-slice pools too)", () =>
    Effect.gen(function* () {
      const [pods, nodes, slices] = [fake("pods"), fake("nodes"), fake("nodeslicepools")]
      const carry = carryRestarts([pods, nodes, slices])
      const restarts = (resource: string) => metric("informer_restarts_total", { resource })
      yield* carry
      expect(yield* restarts("pods")).toBe(0)
      nodes.restart()
      nodes.restart()
      slices.restart()
      yield* carry
      expect([yield* restarts("nodes"), yield* restarts("nodeslicepools"), yield* restarts("pods")]).toEqual([2, 1, 0])
      // Only the increments since the last round are added.
      nodes.restart()
      yield* carry
      yield* carry
      expect([yield* restarts("nodes"), yield* restarts("nodeslicepools")]).toEqual([3, 1])
    }).pipe(Effect.provide(Metrics.layer))
  )
})
