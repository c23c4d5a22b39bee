/**
 * The live re-check right before a destructive write: which pods exist now under the podrefs a plan
 * would free, read from the API server (never the cache): GETs, or one LIST of a namespace when that costs less.
 */
import { Clock, Effect, Either, Option } from "effect"
import { type NodeRecord, neverRunsAgain, nodeFactOf } from "../domain/never-runs-again.ts"
import { type ClaimSource, claimantRefs, withClaimants } from "../domain/claims.ts"
import { type NamespacedName, type PodProjection, podRef, splitPodRef } from "../domain/pod.ts"
import { type Holding, type LivePods, type LivenessFacts, recheckTargets } from "../domain/release.ts"
import type { Caches } from "../services/Caches.ts"
import { ControllerConfig, neverRunsAgainPolicy } from "../services/ControllerConfig.ts"
import type { KubeError } from "../services/KubeError.ts"
import type { ReadOptions } from "../services/KubeApi.ts"
import { Pods } from "../services/Pods.ts"
import { apiError } from "./executor.ts"

/** The client's budget in requests per second: its --api-qps cap, unbounded without one. */
const budgetOf = (apiQps: number): number => (apiQps > 0 ? apiQps : Number.POSITIVE_INFINITY)

/**
 * Above this many pods of one namespace the re-check may list it instead (one request, but the server
 * reads the whole namespace): GETs while they cost at most 1/16 s of the budget, 8 to 32 (32 without a cap).
 */
export const listRecheckThreshold = (apiQps: number): number => Math.min(32, Math.max(8, Math.floor(budgetOf(apiQps) / 16)))

/** How many pods a LIST reads, at most, for each re-checked pod before GETs are the cheaper choice for the server. */
export const LIST_READS_PER_POD = 16

/**
 * Whether re-checking `refs` pods of one namespace lists it: above `listRecheckThreshold`, when the namespace
 * is small for the batch (LIST_READS_PER_POD) or, under a cap, when the GETs would take over 2 s of the budget.
 */
export const recheckByList = (refs: number, namespacePods: number, apiQps: number): boolean =>
  refs > listRecheckThreshold(apiQps) && (refs * LIST_READS_PER_POD >= namespacePods || refs > 2 * budgetOf(apiQps))

export const RECHECK_GET_CONCURRENCY = 16

type NamespaceSizes = (namespaces: ReadonlySet<string>) => ReadonlyMap<string, number>

/**
 * The pods (by podref) that exist now under these namespace/names; without `namespacePods` a namespace
 * counts as small. `options` (Pods) narrows what the server sends when only existence matters.
 */
const livePodsByRef = (refs: ReadonlyArray<NamespacedName>, options: ReadOptions = {}, namespacePods?: NamespaceSizes) =>
  Effect.gen(function* () {
    const pods = yield* Pods
    const { apiQps } = yield* ControllerConfig
    const found = new Map<string, PodProjection>()
    const byNamespace = Map.groupBy(refs, (r) => r.namespace)
    // Sizes only matter for namespaces with enough refs to list at all.
    const large = new Set([...byNamespace].filter(([, rs]) => rs.length > listRecheckThreshold(apiQps)).map(([ns]) => ns))
    const sizes = large.size > 0 && namespacePods !== undefined ? namespacePods(large) : new Map<string, number>()
    const listed = new Set([...large].filter((ns) => recheckByList(byNamespace.get(ns)!.length, sizes.get(ns) ?? 0, apiQps)))
    const got = [...byNamespace].filter(([ns]) => !listed.has(ns)).flatMap(([, rs]) => rs)
    const keep = (p: PodProjection) => void found.set(podRef(p), p)
    const getEach = Effect.forEach(got, (r) => Effect.map(pods.get(r.namespace, r.name, options), Option.map(keep)), { concurrency: RECHECK_GET_CONCURRENCY, discard: true })
    const listEach = Effect.forEach(listed, (ns) => Effect.map(pods.list(ns, options), (list) => list.forEach(keep)), { concurrency: 2, discard: true })
    yield* Effect.all([getEach, listEach], { concurrency: 2, discard: true })
    return found as ReadonlyMap<string, PodProjection>
  })

const failAll = (holdings: ReadonlyArray<Holding>, refs: ReadonlySet<string>, e: KubeError) =>
  holdings.map((h) => (refs.has(h.podref) ? { ...h, error: apiError(h.podref, e) } : h))

/**
 * The live re-check of a plan's candidates: whether a pod of each name exists (all a deletion needs:
 * metadata only); for the other claims the pod's state and its node's; with a claim source, the pods
 * listing a candidate's addresses (rule 0) too. A failed read fails every holding it was for.
 */
export const recheckHoldings = (found: ReadonlyArray<Holding>, namespacePods?: NamespaceSizes, claims?: ClaimSource) =>
  Effect.gen(function* () {
    const holdings = claims === undefined ? found : withClaimants(found, claims)
    const targets = recheckTargets(holdings)
    const [deleted, full] = [targets.filter((h) => h.claim === "Deleted"), targets.filter((h) => h.claim !== "Deleted")]
    const claimants = claimantRefs(targets)
    const stateRefs = new Set([...full.map((h) => h.podref), ...claimants])
    const byName = yield* Effect.either(livePodsByRef(deleted.flatMap((h) => h.pod ?? []), { metadataOnly: true, namesOnly: true }, namespacePods))
    const byState = yield* Effect.either(livePodsByRef([...stateRefs].flatMap((ref) => splitPodRef(ref) ?? []), {}, namespacePods))
    let checked = holdings
    if (Either.isLeft(byName)) checked = failAll(checked, new Set(deleted.map((h) => h.podref)), byName.left)
    // The holdings some other pod's listing may keep (rule 0): they need the claimants read and judged.
    const claimed = targets.filter((h) => claimantRefs([h]).size > 0).map((h) => h.podref)
    if (Either.isLeft(byState)) checked = failAll(checked, new Set([...full.map((h) => h.podref), ...claimed]), byState.left)
    const live: LivePods = new Map([...Either.getOrElse(byName, () => new Map()), ...Either.getOrElse(byState, () => new Map())])
    // Pods that may never run again, and pods an operator named (freed if they never run again): judged by their nodes too;
    // and the claimants, as one that will never run again claims nothing (rule 0).
    const ended = new Set(full.filter((h) => h.claim === "NeverRunsAgain" || h.claim === "Operator").map((h) => h.podref))
    const judged = new Set([...ended, ...claimants])
    const judge = yield* Effect.either(nodeFacts([...live.values()].filter((p) => judged.has(podRef(p)))))
    // Unjudged, a claimant would keep what it may not hold: its holdings are retried, not kept.
    const unjudged = new Set([...ended, ...claimed])
    if (Either.isLeft(judge)) return { holdings: failAll(checked, unjudged, judge.left), facts: { live } satisfies LivenessFacts }
    return { holdings: checked, facts: { live, neverRunsAgain: judge.right } satisfies LivenessFacts }
  })

/** The never-run-again rule for these live pods, their nodes read live (only a terminating pod is judged by its node). */
const nodeFacts = (pods: ReadonlyArray<PodProjection>) =>
  Effect.gen(function* () {
    const live = yield* Pods
    const config = yield* ControllerConfig
    const names = [...new Set(pods.flatMap((p) => (p.deletionTimestamp !== undefined && p.nodeName !== undefined ? [p.nodeName] : [])))]
    // Each name read: its node, or undefined where the read found none (gone).
    const read = new Map<string, NodeRecord | undefined>()
    yield* Effect.forEach(names, (name) => Effect.map(live.node(name), (n) => void read.set(name, n._tag === "Present" ? n.node : undefined)), { concurrency: RECHECK_GET_CONCURRENCY, discard: true })
    const now = yield* Clock.currentTimeMillis
    const policy = neverRunsAgainPolicy(config)
    return (pod: PodProjection) => neverRunsAgain(pod, nodeFactOf(pod, (name) => read.get(name), (name) => read.has(name)), now, policy)
  })

/** Pods the cache holds in each of these namespaces (one pass over the pod cache). */
export const cachedPodsIn =
  (caches: Caches["Type"]): NamespaceSizes =>
  (namespaces) => {
    const counts = new Map<string, number>()
    for (const p of caches.pods.byKey.values()) if (namespaces.has(p.namespace)) counts.set(p.namespace, (counts.get(p.namespace) ?? 0) + 1)
    return counts
  }
