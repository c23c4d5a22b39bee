/**
 * KubeApi over a real API server: its verbs as requests (live/request.ts) through ONE long-lived
 * keep-alive undici Agent (live/transport.ts; client-node would build one, so a TLS handshake, per
 * request). What to do about a 429 or a Retry-After is ApiFlow.ts's.
 */
import { Duration, Effect, Layer, type RateLimiter, Stream } from "effect"
import { ControllerConfig, apiBurst } from "./ControllerConfig.ts"
import { KubeApi, type KubeApiShape, type KubeObject, type ListOptions, type ListResult, type ReadOptions, malformed, nameOnly } from "./KubeApi.ts"
import type { KubeError } from "./KubeError.ts"
import { type Resource, apiVersionOf, resourcePath } from "./resources.ts"
import { rateLimiter } from "./TokenBucket.ts"
import { type KubeConfigError, resolveKubeConfig, sourcesFrom } from "./live/kubeconfig.ts"
import { type Request, type Requester, makeRequester } from "./live/request.ts"
import { type Transport, makeTransport, targetOf } from "./live/transport.ts"
import { isKubeObject } from "./live/watch.ts"
import { isRecord } from "../domain/json.ts"

export * from "./live/kubeconfig.ts"
export * from "./live/transport.ts"
export * from "./live/watch.ts"

/**
 * Accept headers of client-go's metadata client (JSON only): PartialObjectMetadata(List) where the
 * server can transform, the full object where it cannot (then only more is parsed).
 */
const ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
const ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
/** kubectl's Accept for tables, with the metadata list as the fallback where the server has no table. */
const ACCEPT_TABLE = `application/json;as=Table;g=meta.k8s.io;v=v1,${ACCEPT_METADATA_LIST}`
const acceptFor = (options: ReadOptions | undefined, list = false): { readonly accept?: string } =>
  options?.metadataOnly === true ? { accept: list ? ACCEPT_METADATA_LIST : ACCEPT_METADATA } : {}

/** apiVersion/kind from the resource where missing: a POST/PUT body needs them, and lists of built-in types leave them off their items. */
const withTypeMeta = (r: Resource, o: KubeObject): KubeObject =>
  o.apiVersion !== undefined && o.kind !== undefined ? o : { ...o, apiVersion: o.apiVersion ?? apiVersionOf(r), kind: o.kind ?? r.kind }

export interface LiveOptions {
  readonly transport: Transport
  readonly limiter: RateLimiter.RateLimiter
  readonly requestTimeout: Duration.DurationInput
}

/** The names of a Table's rows (its column of format "name"); undefined when it has none. */
const tableNames = (u: Record<string, unknown>): ReadonlyArray<string> | undefined => {
  const columns = Array.isArray(u["columnDefinitions"]) ? u["columnDefinitions"] : []
  const at = columns.findIndex((c) => isRecord(c) && c["format"] === "name")
  const rows = u["rows"] ?? []
  if (at < 0 || !Array.isArray(rows)) return undefined
  const names = rows.map((row) => (isRecord(row) && Array.isArray(row["cells"]) ? row["cells"][at] : undefined))
  return names.every((n) => typeof n === "string") ? (names as ReadonlyArray<string>) : undefined
}

/**
 * A list answer as ListResult: its items typed, the continue token when there is one. `names` (a
 * namesOnly list of that namespace): a Table, or the list the server sent instead, as names.
 */
const listResult = (r: Resource, target: string, u: unknown, names?: { readonly namespace: string }): Effect.Effect<ListResult, KubeError> => {
  const meta = isRecord(u) && isRecord(u["metadata"]) ? u["metadata"] : undefined
  if (!isRecord(u) || meta === undefined) return Effect.fail(malformed("list", target, "expected a list"))
  const page = {
    resourceVersion: typeof meta["resourceVersion"] === "string" ? meta["resourceVersion"] : "",
    continue: typeof meta["continue"] === "string" && meta["continue"] !== "" ? meta["continue"] : undefined
  }
  if (names !== undefined && u["kind"] === "Table") {
    const rows = tableNames(u)
    if (rows === undefined) return Effect.fail(malformed("list", target, "expected a table with a name column"))
    return Effect.succeed({ ...page, items: rows.map((name) => nameOnly(name, names.namespace)) })
  }
  const items = u["items"]
  if (!(Array.isArray(items) || items === null)) return Effect.fail(malformed("list", target, "expected a list"))
  const objects: ReadonlyArray<KubeObject> = (items ?? []).filter(isKubeObject)
  return Effect.succeed({ ...page, items: names === undefined ? objects.map((o) => withTypeMeta(r, o)) : objects.map((o) => nameOnly(o.metadata.name, names.namespace)) })
}

/** A request's verb and method, addressed to the collection, or to the object `name`. */
const to = (verb: string, method: Request["method"], r: Resource, ns: string | undefined, name?: string) => ({
  verb,
  method,
  target: targetOf(r, ns, name),
  path: resourcePath(r, ns, name)
})

/** One page of a list. */
const list = (send: Requester["send"], r: Resource, ns: string | undefined, options: ListOptions): Effect.Effect<ListResult, KubeError> => {
  const names = options.namesOnly === true && ns !== undefined ? { namespace: ns } : undefined
  const req: Request = {
    ...to("list", "GET", r, ns),
    query: { limit: options.limit, continue: options.continue, labelSelector: options.labelSelector, fieldSelector: options.fieldSelector, ...(names === undefined ? {} : { includeObject: "None" }) },
    ...(names === undefined ? acceptFor(options, true) : { accept: ACCEPT_TABLE })
  }
  return Effect.flatMap(send(req), (u) => listResult(r, req.target, u, names))
}

/** KubeApi over a transport; every request and every watch start passes the limiter. */
export const makeLiveKubeApi = ({ transport, limiter, requestTimeout }: LiveOptions): KubeApiShape => {
  const { send, watch } = makeRequester(transport, limiter, requestTimeout)
  const object = (req: Request, r: Resource) =>
    Effect.flatMap(send(req), (u) =>
      isKubeObject(u) ? Effect.succeed(withTypeMeta(r, u)) : Effect.fail(malformed(req.verb, req.target, "expected an object with metadata"))
    )
  return {
    get: (r, ns, name, options) => object({ ...to("get", "GET", r, ns, name), ...acceptFor(options) }, r),
    list: (r, ns, options = {}) => list(send, r, ns, options),
    create: (r, ns, o) =>
      object({ ...to("create", "POST", r, ns), target: targetOf(r, ns, o.metadata.name || o.metadata.generateName || ""), body: withTypeMeta(r, o) }, r),
    replace: (r, ns, o) => object({ ...to("replace", "PUT", r, ns, o.metadata.name), body: withTypeMeta(r, o) }, r),
    patch: (r, ns, name, p, options) =>
      object(
        {
          ...to("patch", "PATCH", r, ns, name),
          ...(p.type === "json" ? { body: p.ops, contentType: "application/json-patch+json" } : { body: p.body, contentType: "application/merge-patch+json" }),
          ...acceptFor(options)
        },
        r
      ),
    delete: (r, ns, name, { gracePeriodSeconds, preconditions } = {}) =>
      Effect.asVoid(send({ ...to("delete", "DELETE", r, ns, name), body: { kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds, preconditions } })),
    watch: (r, ns, options) =>
      Stream.unwrapScoped(
        watch(
          {
            ...to("watch", "GET", r, ns),
            query: {
              watch: "true",
              resourceVersion: options.resourceVersion,
              allowWatchBookmarks: "true",
              timeoutSeconds: options.timeoutSeconds,
              labelSelector: options.labelSelector,
              fieldSelector: options.fieldSelector
            }
          },
          // The server ends the watch after timeoutSeconds; silence well beyond that means a dead connection.
          Duration.seconds((options.timeoutSeconds ?? 300) + 60)
        )
      )
  }
}

/** KubeApi over the configured API server; the Agent and the rate limiter live as long as the layer. */
export const layerLive: Layer.Layer<KubeApi, KubeConfigError, ControllerConfig> = Layer.scoped(
  KubeApi,
  Effect.gen(function* () {
    const config = yield* ControllerConfig
    const resolved = yield* resolveKubeConfig(yield* sourcesFrom(config.kubeconfig))
    const transport = yield* makeTransport(resolved)
    const limiter = yield* rateLimiter(config.apiQps, apiBurst(config.apiQps))
    yield* Effect.logDebug(`Kubernetes API ${transport.server} (from ${resolved.source})`)
    return makeLiveKubeApi({ transport, limiter, requestTimeout: config.requestTimeout })
  })
)
