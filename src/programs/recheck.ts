/**
 * The live re-check right before a destructive write: which pods exist now under the podrefs a
 * plan would free, read from the API server (never the cache). Per namespace, GETs, or one LIST
 * when a namespace has many candidates and listing it costs the server less.
 */
import { Effect, Option } from "effect"
import { type PodProjection, podRef } from "../domain/pod.ts"
import type { Caches } from "../services/Caches.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import type { ReadOptions } from "../services/KubeApi.ts"
import { Pods } from "../services/Pods.ts"

/**
 * Above this many pods of one namespace the re-check may list the namespace instead of getting
 * each pod: a LIST costs one request of the client's budget but the server reads the whole
 * namespace. GETs are kept while they cost at most 1/16 s of that budget (`apiQps / 16`), and
 * never fewer than 8 or more than 32.
 */
export const listRecheckThreshold = (apiQps: number): number => Math.min(32, Math.max(8, Math.floor(apiQps / 16)))

/** How many pods a LIST reads, at most, for each re-checked pod before GETs are the cheaper choice for the server. */
export const LIST_READS_PER_POD = 16

/**
 * Whether the re-check of `refs` pods of one namespace lists it instead of getting each pod: only
 * above `listRecheckThreshold`, and then when the namespace is small for the batch (at most
 * LIST_READS_PER_POD cached pods per re-checked pod) or the GETs would take more than two
 * seconds of the client's budget (`2 × apiQps`), whatever the namespace's size.
 */
export const recheckByList = (refs: number, namespacePods: number, apiQps: number): boolean =>
  refs > listRecheckThreshold(apiQps) && (refs * LIST_READS_PER_POD >= namespacePods || refs > 2 * apiQps)

/** Re-check GETs in flight at once. */
export const RECHECK_GET_CONCURRENCY = 16

type Ref = { readonly namespace: string; readonly name: string }

const groupByNamespace = (refs: ReadonlyArray<Ref>): Map<string, Array<Ref>> => {
  const out = new Map<string, Array<Ref>>()
  for (const r of refs) {
    const list = out.get(r.namespace)
    if (list === undefined) out.set(r.namespace, [r])
    else list.push(r)
  }
  return out
}

/**
 * The pods (by podref) that exist right now under these namespace/names. `namespacePods` tells
 * how many pods the cache holds in the namespaces asked about (without it a namespace counts as
 * small). `metadataOnly` when only existence matters (see Pods): the server sends
 * PartialObjectMetadata, a fraction of a pod.
 */
export const livePodsByRef = (
  refs: ReadonlyArray<Ref>,
  options: ReadOptions = {},
  namespacePods?: (namespaces: ReadonlySet<string>) => ReadonlyMap<string, number>
) =>
  Effect.gen(function* () {
    const pods = yield* Pods
    const { apiQps } = yield* ControllerConfig
    const found = new Map<string, PodProjection>()
    const byNamespace = groupByNamespace(refs)
    // Sizes only matter for namespaces with enough refs to list at all.
    const large = new Set([...byNamespace].filter(([, rs]) => rs.length > listRecheckThreshold(apiQps)).map(([ns]) => ns))
    const sizes = large.size > 0 && namespacePods !== undefined ? namespacePods(large) : new Map<string, number>()
    const listed = new Set([...large].filter((ns) => recheckByList(byNamespace.get(ns)!.length, sizes.get(ns) ?? 0, apiQps)))
    const got = [...byNamespace].filter(([ns]) => !listed.has(ns)).flatMap(([, rs]) => rs)
    const getEach = Effect.forEach(got, (r) => Effect.map(pods.get(r.namespace, r.name, options), Option.map((p) => found.set(podRef(p), p))), {
      concurrency: RECHECK_GET_CONCURRENCY,
      discard: true
    })
    const listEach = Effect.forEach(listed, (ns) => Effect.map(pods.list(ns, options), (list) => list.forEach((p) => found.set(podRef(p), p))), {
      concurrency: 2,
      discard: true
    })
    yield* Effect.all([getEach, listEach], { concurrency: 2, discard: true })
    return found as ReadonlyMap<string, PodProjection>
  })

/** Pods the cache holds in each of these namespaces (one pass over the pod cache). */
export const cachedPodsIn =
  (caches: Caches["Type"]) =>
  (namespaces: ReadonlySet<string>): ReadonlyMap<string, number> => {
    const counts = new Map<string, number>()
    for (const p of caches.pods.values()) if (namespaces.has(p.namespace)) counts.set(p.namespace, (counts.get(p.namespace) ?? 0) + 1)
    return counts
  }
