/**
 * OverlappingRangeIPReservations: live get/list, and deletes guarded so that a reservation
 * re-created for another pod in the meantime is never removed.
 */
import { Context, Effect, Layer, Option } from "effect"
import { type ReservationRecord, toReservationRecord } from "./Caches.ts"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, ifExists, listItems } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import * as R from "./resources.ts"

export type DeleteOutcome = "deleted" | "absent" | "reassigned"

export interface ReservationsShape {
  readonly list: Effect.Effect<ReadonlyArray<ReservationRecord>, KubeError>
  /**
   * Deletes the reservation if it still belongs to `podref`. NotFound is success ("absent");
   * a reservation now held by another pod is left alone ("reassigned").
   */
  readonly deleteFor: (name: string, podref: string) => Effect.Effect<DeleteOutcome, KubeError>
  /**
   * Deletes the reservation exactly as listed (its resourceVersion as precondition): one deleted
   * and re-created since — by a pod reborn under the same name, say — is left alone ("reassigned").
   */
  readonly deleteListed: (listed: ReservationRecord) => Effect.Effect<DeleteOutcome, KubeError>
  /**
   * Gives back a reservation the controller deleted for an address a pod reborn under the same
   * name took back; one that exists already (the reborn pod's re-ADD wrote it) is left as it is.
   * Written as whereabouts 0.9 writes reservations: podref and ifname, no container id.
   */
  readonly restore: (name: string, spec: { readonly podref: string; readonly ifname?: string }) => Effect.Effect<void, KubeError>
}

export class Reservations extends Context.Tag("whereabouts-controller/Reservations")<Reservations, ReservationsShape>() {}

export const make = Effect.gen(function* () {
  const api = yield* KubeApi
  const { namespace, reservationPageSize } = yield* ControllerConfig
  const get = (name: string) => Effect.map(ifExists(api.get(R.OverlappingRangeIPReservations, namespace, name)), Option.map(toReservationRecord))

  const deleteAt = (name: string, resourceVersion: string | undefined) =>
    api.delete(R.OverlappingRangeIPReservations, namespace, name, { preconditions: { resourceVersion } }).pipe(
      Effect.as("deleted" as const),
      Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeed("absent" as const))
    )

  // Delete with the resourceVersion just read as precondition, so a reservation rewritten for another
  // pod in between is never removed; a Conflict means it changed since, so read and check again
  // (bounded: someone rewriting it constantly wins).
  const deleteFor = (name: string, podref: string): Effect.Effect<DeleteOutcome, KubeError> =>
    Effect.gen(function* () {
      const current = yield* get(name)
      if (Option.isNone(current)) return "absent" as const
      if (current.value.podref !== podref) return "reassigned" as const
      return yield* deleteAt(name, current.value.resourceVersion)
    }).pipe(Effect.retry({ times: 3, while: (e) => e.reason === "Conflict" }))

  return {
    list: listItems(api, R.OverlappingRangeIPReservations, namespace, toReservationRecord, { pageSize: reservationPageSize }),
    deleteFor,
    deleteListed: (listed) =>
      deleteAt(listed.name, listed.resourceVersion).pipe(
        Effect.catchIf((e) => e.reason === "Conflict", () => Effect.succeed("reassigned" as const))
      ),
    restore: (name, spec) =>
      api.create(R.OverlappingRangeIPReservations, namespace, { metadata: { name, namespace }, spec }).pipe(
        Effect.asVoid,
        Effect.catchIf((e) => e.reason === "AlreadyExists", () => Effect.void)
      )
  } satisfies ReservationsShape
})

export const layer: Layer.Layer<Reservations, never, KubeApi | ControllerConfig> = Layer.effect(Reservations, make)
