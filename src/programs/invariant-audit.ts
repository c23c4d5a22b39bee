/**
 * The invariants as `audit` judges them, once, on its fresh listing. With no memory of how long a
 * disagreement has lasted, a violation counts only when every pod it involves, read live, is still
 * that Running pod and was Ready --invariant-grace before the listing began (its ADD done before any
 * of it was read). A pod without a Ready condition is not judged. What is left out is counted.
 */
import { Duration, Effect, Either } from "effect"
import { type InvariantViolation, type PodIdentity, invariantViolations, judged, makeEntryLookup } from "../domain/invariants.ts"
import { isRecord, list, record } from "../domain/json.ts"
import { type PodProjection, projectPod } from "../domain/pod.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { KubeApi, type KubeObject } from "../services/KubeApi.ts"
import * as R from "../services/resources.ts"
import { invariantView } from "./snapshot.ts"
import type { World } from "./sweep.ts"

export interface AuditedInvariants {
  readonly violations: ReadonlyArray<InvariantViolation>
  /** Violations the listing shows whose pods are not Ready for long enough (or changed since): not counted. */
  readonly notJudged: number
}

/** When a pod object's Ready condition turned True (ms since the epoch); undefined when it is not Ready. */
const readySince = (o: KubeObject): number | undefined => {
  const status = record(o["status"])
  const ready = list(status["conditions"]).find((c) => isRecord(c) && c["type"] === "Ready" && c["status"] === "True")
  const since = isRecord(ready) && typeof ready["lastTransitionTime"] === "string" ? Date.parse(ready["lastTransitionTime"]) : Number.NaN
  return Number.isNaN(since) ? undefined : since
}

/** Whether the pod, read live, is still this Running pod and has been Ready since `before`. */
const settled = (pod: PodIdentity, before: number) =>
  Effect.flatMap(KubeApi, (api) =>
    Effect.map(Effect.either(api.get(R.Pods, pod.namespace, pod.name)), (read) => {
      if (Either.isLeft(read)) return false
      const live: PodProjection = projectPod(read.right)
      const since = readySince(read.right)
      return live.uid === pod.uid && judged(live) && since !== undefined && since <= before
    })
  )

/** The violations of a sweep's listing whose pods are settled; `startedAt` when the listing began. */
export const auditInvariants = (world: World, startedAt: number) =>
  Effect.gen(function* () {
    const { invariantGrace } = yield* ControllerConfig
    const { pods, listedBy } = world
    const given = { pods: pods.values(), listedBy, pod: (ref: string) => pods.get(ref), pools: [...world.pools.values()], entryAt: makeEntryLookup() }
    const found = invariantViolations(invariantView(given, world.snapshot))
    const before = startedAt - Duration.toMillis(invariantGrace)
    // Each pod read once, however many violations involve it.
    const refs = [...new Map(found.flatMap((v) => v.pods).map((p) => [`${p.namespace}/${p.name}@${p.uid}`, p] as const))]
    const verdicts = new Map(yield* Effect.forEach(refs, ([key, p]) => Effect.map(settled(p, before), (ok) => [key, ok] as const), { concurrency: 8 }))
    const violations = found.filter((v) => v.pods.every((p) => verdicts.get(`${p.namespace}/${p.name}@${p.uid}`) === true))
    return { violations, notJudged: found.length - violations.length } satisfies AuditedInvariants
  })
