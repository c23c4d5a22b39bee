/**
 * A relist of the pods means their watch had a gap (410 after a compaction or an API server
 * restart, or a restart after an error): a pod created and deleted inside it was in no list and no
 * event, so no deletion reached the release loop, and its addresses are orphans only a sweep
 * finds. One sweep runs after each relist that follows a gap (a burst of relists, once), instead
 * of leaving them to the next scheduled sweep.
 */
import { Duration, Effect, Queue } from "effect"
import { Caches } from "../services/Caches.ts"

/** Relists this close together are one gap: one sweep. */
export const RELIST_SETTLE = Duration.seconds(1)

/** Runs `sweep` after every relist of the pods (subscribed at once, so none after the call is missed); never returns. */
export const sweepAfterRelists = <A, E, R>(sweep: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const caches = yield* Caches
    const relists = yield* caches.pods.subscribeRelists
    for (;;) {
      yield* Queue.take(relists)
      yield* Effect.sleep(RELIST_SETTLE)
      yield* Queue.takeAll(relists)
      yield* Effect.logInfo("pods were listed again after a gap in their watch: sweeping for pods the gap hid")
      yield* sweep
    }
  })
