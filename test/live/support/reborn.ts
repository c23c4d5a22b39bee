/**
 * The #182 race, made to happen against a real API server: a StatefulSet pod is deleted, the
 * controller re-checks it by name (gone), and only then the pod is reborn under that name and its
 * CNI ADD takes the same address back — before the controller's guarded release reaches the pool.
 *
 * No hook can hold a separate process between two of its API calls, so the controller is paced
 * instead: with `PACED` its client-side rate limiter lets one request through every second,
 * and the test acts as soon as /metrics shows the controller's re-check came back 404.
 */
import { Effect } from "effect"
import { type RunningPod, deletePod, startPod } from "../../../src/testing/cni-plugin.ts"
import type { ControllerProcess } from "./controller-process.ts"
import { metricOf } from "./controller.ts"
import { on, poolIPs, reservationView, waitUntil } from "./world.ts"

/** Controller flags for the race: no Lease traffic, one API request per second (a cap of 1 has a burst of 1). */
export const PACED: ReadonlyArray<string> = ["--no-leader-elect", "--api-qps", "1"]

const counter = (ctl: ControllerProcess, verb: string, resource: string, codes: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(codes, (code) => metricOf(ctl, "whereabouts_controller_api_requests_total", { verb, resource, code })),
    (ns) => ns.reduce((a: number, n) => a + (n ?? 0), 0)
  )

export interface RaceOutcome {
  readonly reborn: RunningPod
  /** What the pool holds at the address afterwards. */
  readonly allocation: { readonly podref: string; readonly id: string } | undefined
  /** The reservation's podref afterwards (undefined: none). */
  readonly reservation: string | undefined
}

/**
 * Deletes `old` (a running pod on NAD `nad`, holding `ip` in `pool`), waits for the controller's
 * re-check to miss it, re-creates it under the same name at once, then waits until the controller
 * has tried to give the reservation back (a create, allowed or not) and reads the outcome.
 */
export const rebornRace = (
  ctl: ControllerProcess,
  race: { readonly old: RunningPod; readonly nad: string; readonly pool: string; readonly ip: string; readonly reservation: string }
) =>
  Effect.gen(function* () {
    const rechecks = counter(ctl, "get", "pods", ["404"])
    const before = yield* rechecks
    yield* deletePod(race.old)
    yield* waitUntil("the controller re-checked the deleted pod (404)", rechecks, (n) => n > before, { interval: "20 millis", context: () => ctl.tail() })
    const reborn = yield* startPod(race.old.namespace, race.old.name, [on(`${race.old.namespace}/${race.nad}`)])
    yield* waitUntil(
      "the controller gave the reservation back (or tried to)",
      counter(ctl, "create", "overlappingrangeipreservations", ["201", "409", "403"]),
      (n) => n > 0,
      { context: () => ctl.tail() }
    )
    const allocation = (yield* poolIPs(race.pool)).get(race.ip)
    const reservation = (yield* reservationView)[race.reservation]
    return { reborn, allocation: allocation === undefined ? undefined : { podref: allocation.podref, id: allocation.id }, reservation } satisfies RaceOutcome
  })
