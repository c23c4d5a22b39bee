/**
 * The controller's releases against the CNI plugin's writes on ONE pool, in every order a
 * fast-check scheduler picks: each API call on pods, pools and reservations waits for the
 * scheduler's go, and the controller's caches are refreshed only at scheduled points. Invariants:
 * between any two calls no live pod has lost its address and none is handed to two live pods; once
 * everything settled (and every deleted pod was reconciled again) every live pod also holds its
 * reservation, and nothing of a dead pod remains.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, FastCheck as fc, Fiber } from "effect"
import { type RunningPod, deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { freePods } from "../support/free-pods.ts"
import { runSweep } from "../../src/programs/sweep.ts"
import { type PodProjection, projectPod } from "../../src/domain/pod.ts"
import * as R from "../../src/services/resources.ts"
import { on } from "../support/controller.ts"
import { MemoryClusterState } from "../../src/testing/InMemoryCluster.ts"
import { HookSlots } from "../support/hooks.ts"
import {
  interleavingWorld,
  isScheduled,
  leftovers,
  seedNad,
  snapshotCaches,
  violations
} from "../support/interleavings.ts"

const NS = "default"
const POOL = "10.200.0.0-28"

/** How one incarnation of a pod ends: deleted without CNI DEL (the controller frees it), with CNI DEL, or not at all. */
type End = "leak" | "del" | "stay"

/** Per pod name, its incarnations in order (a StatefulSet re-creates the same name). */
type Scenario = ReadonlyArray<ReadonlyArray<End>>

const scenarioArb: fc.Arbitrary<Scenario> = fc.array(fc.array(fc.constantFrom<End>("leak", "del", "stay"), { minLength: 1, maxLength: 3 }), {
  minLength: 1,
  maxLength: 3
})

interface RunResult {
  /** First invariant violation seen between two scheduled calls, with the calls so far. */
  readonly duringRun: ReadonlyArray<string>
  /** Invariants once everything settled and every deleted pod was reconciled again. */
  readonly atRest: ReadonlyArray<string>
  readonly leftovers: ReadonlyArray<string>
  readonly failures: ReadonlyArray<string>
  readonly trace: ReadonlyArray<string>
}

/**
 * Runs a scenario with every scheduled API call released by `go` (the scheduler), then settles:
 * a final cache refresh and a reconcile of every deleted incarnation, with no scheduler.
 */
const runScenario = (
  scenario: Scenario,
  go: (label: string) => Promise<void>,
  options: { readonly cacheRefreshes?: number; readonly sweeps?: number } = {}
) =>
  Effect.gen(function* () {
    const state = new MemoryClusterState()
    const slots = new HookSlots()
    const { caches, refresh } = snapshotCaches(state)
    seedNad(state, NS, "net1", { range: "10.200.0.0/28" })
    refresh()

    const trace: Array<string> = []
    const duringRun: Array<string> = []
    const tearingDown = new Set<string>() // pods inside their CNI DEL: their address goes first, legitimately
    const check = (when: string) => {
      if (duringRun.length > 0) return
      // Reservations are checked at rest only: one a reborn pod re-took is given back right after the
      // controller's pool write (see restoreReservations), so it may be missing for a step or two.
      const bad = violations(state, POOL, NS, tearingDown, { reservations: false })
      if (bad.length > 0) duringRun.push(`after [${trace.join(", ")}] (${when}): ${bad.join("; ")}`)
    }
    slots.before = (call) =>
      isScheduled(call)
        ? Effect.promise(() => go(`${call.verb} ${call.resource}${call.name === undefined ? "" : ` ${call.name}`}`)).pipe(
            Effect.tap(() =>
              Effect.sync(() => {
                check(`before ${call.verb} ${call.resource}`)
                trace.push(`${call.verb} ${call.resource}${call.name === undefined ? "" : ` ${call.name}`}`)
              })
            )
          )
        : Effect.void
    slots.after = (call) => (isScheduled(call) ? Effect.sync(() => check(`after ${call.verb} ${call.resource}`)) : Effect.void)

    const leaked: Array<PodProjection> = []
    const failures: Array<string> = []
    const program = Effect.gen(function* () {
      const controllers: Array<Fiber.RuntimeFiber<unknown, unknown>> = []
      const lifecycle = (name: string, ends: ReadonlyArray<End>) =>
        Effect.gen(function* () {
          for (const end of ends) {
            const pod: RunningPod = yield* startPod(NS, name, [on("net1")])
            if (end === "stay") return
            if (end === "del") {
              tearingDown.add(`${NS}/${name}`)
              yield* deletePod(pod, { cniDel: true })
              tearingDown.delete(`${NS}/${name}`)
              continue
            }
            const o = state.get(R.Pods, NS, name)
            const projection = projectPod(o as Parameters<typeof projectPod>[0])
            yield* deletePod(pod)
            leaked.push(projection)
            // The controller learns of the deletion: its cache is as fresh as the last refresh.
            controllers.push(
              yield* Effect.fork(
                Effect.zipRight(
                  Effect.promise(() => go(`controller sees ${name}`)),
                  freePods([projection])
                )
              )
            )
          }
        }).pipe(Effect.catchAll((e) => Effect.sync(() => void failures.push(`${name}: ${e.message}`))))
      // Informers catching up at moments of the scheduler's choosing.
      const informer = Effect.forEach(Array.from({ length: options.cacheRefreshes ?? 2 }), () =>
        Effect.zipRight(Effect.promise(() => go("cache refresh")), Effect.sync(refresh))
      )
      // The full sweep, racing everything else (its lists and writes are scheduled calls too).
      const sweeper = Effect.forEach(Array.from({ length: options.sweeps ?? 0 }), () =>
        Effect.zipRight(
          Effect.promise(() => go("sweep starts")),
          runSweep({ dryRun: false }).pipe(Effect.catchAll((e) => Effect.sync(() => void failures.push(`sweep: ${e.message}`))))
        )
      )
      yield* Effect.all([...scenario.map((ends, i) => lifecycle(`web-${i}`, ends)), informer, sweeper], { concurrency: "unbounded", discard: true })
      for (const f of controllers) yield* Fiber.await(f)
    })
    const env = interleavingWorld(state, slots, caches)
    const exit = yield* Effect.exit(program.pipe(Effect.provide(env)))
    if (Exit.isFailure(exit)) failures.push(`program: ${String(exit.cause)}`)

    // Settle: no scheduler, fresh caches, every deleted incarnation reconciled once more.
    slots.clear()
    refresh()
    yield* freePods(leaked).pipe(Effect.provide(env))
    const result: RunResult = {
      duringRun,
      atRest: violations(state, POOL, NS, new Set(), { reservations: true }),
      leftovers: leftovers(state, POOL, NS),
      failures,
      trace
    }
    return result
  })

const RUNS = Number(process.env["INTERLEAVING_RUNS"] ?? 300)
/**
 * 300 runs take a few seconds; on a starved machine fast-check stops early rather than let vitest
 * time out (a counter-example found before then still fails the test).
 */
const fastCheck = { numRuns: RUNS, interruptAfterTimeLimit: 90_000, markInterruptAsFailure: false }

/** Runs one scenario under the scheduler and asserts every invariant, with the scheduler's order in the message. */
const property = (scenario: Scenario, s: fc.Scheduler, options: { readonly sweeps?: number } = {}) =>
  Effect.gen(function* () {
    const done = runScenario(scenario, (label) => s.schedule(Promise.resolve(), label), options)
    const result = yield* Effect.promise(() => s.waitFor(Effect.runPromise(done)))
    const report = JSON.stringify({ scenario, schedule: s.report().map((t) => t.label), ...result, trace: undefined })
    expect(result.failures, report).toEqual([])
    expect(result.duringRun, report).toEqual([])
    expect(result.atRest, report).toEqual([])
    expect(result.leftovers, report).toEqual([])
  })

describe("interleavings: CNI plugin writes vs the controller's releases on one pool", () => {
  it.live.prop(
    "deletion loop: no live pod ever loses its address, none is shared; at rest reservations hold and nothing of a dead pod remains",
    { scenario: scenarioArb, s: fc.scheduler() },
    ({ scenario, s }) => property(scenario, s),
    { timeout: 120_000, fastCheck }
  )

  it.live.prop(
    "deletion loop and the full sweep together: the same invariants",
    { scenario: scenarioArb, s: fc.scheduler() },
    ({ scenario, s }) => property(scenario, s, { sweeps: 1 }),
    { timeout: 120_000, fastCheck }
  )

  /**
   * The counterexample a clean-clone CI run found: web-1 deleted without CNI DEL, the re-check
   * finds it gone, web-1 reborn; a batch then freed the pool entry and deleted the reservation at
   * once, and in between the reborn pod's re-ADD took the address back and kept the old
   * reservation (same podref), which the DELETE then removed. Replayed by seed and path (both tied
   * to the arbitraries above): reservations now always go before the pool patch.
   */
  it.live.prop(
    "regression: a reborn pod re-taking its address between the pool write and the reservation delete keeps its reservation",
    { scenario: scenarioArb, s: fc.scheduler() },
    ({ scenario, s }) => property(scenario, s, { sweeps: 1 }),
    { timeout: 120_000, fastCheck: { ...fastCheck, numRuns: 1, seed: -1991888833, path: "287" } }
  )
})
