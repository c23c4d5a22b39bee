/** The release path driven by tests with plain deleted pods, not the loop's candidates. */
import { Effect } from "effect"
import type { PodProjection } from "../../src/domain/pod.ts"
import type { Outcome, ReleaseError } from "../../src/domain/release.ts"
import { type FreeRequirements, freeBatch } from "../../src/programs/free-pods.ts"

/** What deleted pods held, freed. */
export const freePods = (batch: ReadonlyArray<PodProjection>) => freeBatch(batch.map((pod) => ({ claim: "Deleted", pod }) as const))

/** One deleted pod, as a typed Effect: its outcome, or a ReleaseError when nothing could be freed. */
export const freePod = (pod: PodProjection): Effect.Effect<Exclude<Outcome, { readonly _tag: "Failed" }>, ReleaseError, FreeRequirements> =>
  Effect.flatMap(freePods([pod]), ([r]) => {
    if (r === undefined) return Effect.die("empty batch")
    return r.outcome._tag === "Failed" ? Effect.fail(r.outcome.error) : Effect.succeed(r.outcome)
  })
