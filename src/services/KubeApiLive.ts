/**
 * KubeApi over a real API server. client-node resolves the kubeconfig and signs each request
 * (bearer, exec and token-file credentials); the requests themselves go through ONE long-lived
 * keep-alive undici Agent (client-node would build a new Agent, so a new TLS handshake, per
 * request), behind a client-side token-bucket rate limiter and a per-request timeout. HTTP
 * statuses and network failures become KubeError reasons here and nowhere else.
 */
import type { HttpMethod } from "@kubernetes/client-node/dist/gen/http/http.js"
import { Duration, Effect, Layer, type RateLimiter, Stream } from "effect"
import { fetch, interceptors, request } from "undici"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type KubeApiShape, type KubeObject, type ListResult, type ReadOptions, malformed } from "./KubeApi.ts"
import { KubeError } from "./KubeError.ts"
import { type Resource, apiVersionOf, resourcePath } from "./resources.ts"
import { type KubeConfigError, errorText, resolveKubeConfig, sourcesFrom } from "./live/kubeconfig.ts"
import { type Transport, errorFromFailure, errorFromResponse, makeRateLimiter, makeTransport, retryAfterSeconds, targetOf } from "./live/transport.ts"
import { isKubeObject, isObject, watchEvents } from "./live/watch.ts"

export * from "./live/kubeconfig.ts"
export * from "./live/transport.ts"
export * from "./live/watch.ts"

interface Request {
  readonly verb: string
  readonly target: string
  readonly method: HttpMethod
  readonly path: string
  readonly query?: Readonly<Record<string, string | number | undefined>>
  readonly body?: unknown
  readonly contentType?: string
  /** The Accept header; plain JSON by default. */
  readonly accept?: string
}

/**
 * Accept headers of client-go's metadata client (JSON only): PartialObjectMetadata(List) where the
 * server can transform, the full object where it cannot (then only more is parsed).
 */
const ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
const ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
const acceptFor = (options: ReadOptions | undefined, list = false): { readonly accept?: string } =>
  options?.metadataOnly === true ? { accept: list ? ACCEPT_METADATA_LIST : ACCEPT_METADATA } : {}

const USER_AGENT = "whereabouts-controller"
/** Retries of one request the API server asked for with Retry-After (client-go allows 10). */
export const MAX_RETRY_AFTER = 3

const urlOf = (server: string, p: string, query: Request["query"] = {}): string => {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") params.set(k, String(v))
  const qs = params.toString()
  return `${server}${p}${qs === "" ? "" : `?${qs}`}`
}


/** apiVersion/kind from the resource where missing: a POST/PUT body needs them, and lists of built-in
 * types leave them off their items (the in-memory cluster never does). */
const withTypeMeta = (r: Resource, o: KubeObject): KubeObject =>
  o.apiVersion !== undefined && o.kind !== undefined ? o : { ...o, apiVersion: o.apiVersion ?? apiVersionOf(r), kind: o.kind ?? r.kind }

export interface LiveOptions {
  readonly transport: Transport
  readonly limiter: RateLimiter.RateLimiter
  readonly requestTimeout: Duration.DurationInput
}

/** KubeApi over a transport; every request and every watch start passes the limiter. */
export const makeLiveKubeApi = ({ transport, limiter, requestTimeout }: LiveOptions): KubeApiShape => {
  const timeout = Duration.decode(requestTimeout)
  const timedOut = (verb: string, target: string) =>
    new KubeError({ reason: "Timeout", verb, target, detail: `no answer within ${Duration.format(timeout)}` })

  const headersFor = (req: Request, url: string) =>
    Effect.tryPromise({
      try: () => transport.headers(url, req.method),
      catch: (e) => new KubeError({ reason: "Unauthorized", verb: req.verb, target: req.target, detail: `credentials: ${errorText(e)}` })
    }).pipe(
      Effect.map((auth) => ({
        ...auth,
        Accept: req.accept ?? "application/json",
        "User-Agent": USER_AGENT,
        // As client-go: the server compresses large answers (lists of big pools) when asked.
        "Accept-Encoding": "gzip",
        ...(req.body === undefined ? {} : { "Content-Type": req.contentType ?? "application/json" })
      }))
    )

  // Requests use undici's own request API, watches fetch (their body is read as a web stream):
  // fetch costs several times the CPU per request (WHATWG Request/Response/stream objects).
  // fetch decompressed by itself; request needs the interceptor.
  const requests = transport.dispatcher.compose(interceptors.decompress())

  /** One attempt, through the limiter: the answer's status, body and Retry-After. */
  const attempt = (req: Request) =>
    limiter(
      Effect.gen(function* () {
        const url = urlOf(transport.server, req.path, req.query)
        const headers = yield* headersFor(req, url)
        const body = req.body === undefined ? {} : { body: JSON.stringify(req.body) }
        return yield* Effect.tryPromise({
          try: async (signal) => {
            const r = await request(url, { method: req.method, headers, ...body, dispatcher: requests, signal })
            const retryAfter = r.headers["retry-after"]
            return { status: r.statusCode, text: await r.body.text(), retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter }
          },
          catch: (e) => errorFromFailure(req.verb, req.target, e)
        }).pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => timedOut(req.verb, req.target) }))
      })
    )

  /**
   * The parsed JSON body of a 2xx answer (undefined when empty). A 429 or 5xx with Retry-After is
   * tried again after that many seconds, up to MAX_RETRY_AFTER times, as client-go does: the
   * server said when (API Priority and Fairness rejects before handling, so a write is safe to
   * repeat). Without the header, or once the retries are spent, the error goes to the caller.
   */
  const send = (req: Request): Effect.Effect<unknown, KubeError> =>
    Effect.gen(function* () {
      for (let retries = 0; ; retries++) {
        const res = yield* attempt(req)
        if (res.status >= 200 && res.status <= 299) {
          if (res.text === "") return undefined
          return yield* Effect.try({ try: () => JSON.parse(res.text) as unknown, catch: () => malformed(req.verb, req.target, "body is not JSON") })
        }
        const wait = retryAfterSeconds(res.status, res.retryAfter)
        if (wait === undefined || retries >= MAX_RETRY_AFTER || Duration.lessThan(timeout, Duration.seconds(wait))) {
          return yield* Effect.fail(errorFromResponse(req.verb, req.target, res.status, res.text))
        }
        yield* Effect.logDebug(`${req.verb} ${req.target}: HTTP ${res.status}, retrying after ${wait} s as the API server asked`)
        yield* Effect.sleep(Duration.seconds(wait))
      }
    })

  const object = (req: Request, r: Resource) =>
    Effect.flatMap(send(req), (u) =>
      isKubeObject(u) ? Effect.succeed(withTypeMeta(r, u)) : Effect.fail(malformed(req.verb, req.target, "expected an object with metadata"))
    )

  return {
    get: (r, ns, name, options) =>
      object({ verb: "get", target: targetOf(r, ns, name), method: "GET", path: resourcePath(r, ns, name), ...acceptFor(options) }, r),

    list: (r, ns, options = {}) => {
      const req: Request = {
        verb: "list",
        target: targetOf(r, ns),
        method: "GET",
        path: resourcePath(r, ns),
        query: { limit: options.limit, continue: options.continue, labelSelector: options.labelSelector, fieldSelector: options.fieldSelector },
        ...acceptFor(options, true)
      }
      return Effect.flatMap(send(req), (u): Effect.Effect<ListResult, KubeError> => {
        const meta = isObject(u) && isObject(u["metadata"]) ? u["metadata"] : undefined
        const items = isObject(u) ? u["items"] : undefined
        if (meta === undefined || !(Array.isArray(items) || items === null)) return Effect.fail(malformed("list", req.target, "expected a list"))
        const cont = typeof meta["continue"] === "string" && meta["continue"] !== "" ? meta["continue"] : undefined
        return Effect.succeed({
          items: (items ?? []).filter(isKubeObject).map((o) => withTypeMeta(r, o)),
          resourceVersion: typeof meta["resourceVersion"] === "string" ? meta["resourceVersion"] : "",
          continue: cont
        })
      })
    },

    create: (r, ns, o) =>
      object(
        { verb: "create", target: targetOf(r, ns, o.metadata.name || o.metadata.generateName || ""), method: "POST", path: resourcePath(r, ns), body: withTypeMeta(r, o) },
        r
      ),

    replace: (r, ns, o) =>
      object({ verb: "replace", target: targetOf(r, ns, o.metadata.name), method: "PUT", path: resourcePath(r, ns, o.metadata.name), body: withTypeMeta(r, o) }, r),

    patch: (r, ns, name, p, options) =>
      object(
        p.type === "json"
          ? { verb: "patch", target: targetOf(r, ns, name), method: "PATCH", path: resourcePath(r, ns, name), body: p.ops, contentType: "application/json-patch+json", ...acceptFor(options) }
          : { verb: "patch", target: targetOf(r, ns, name), method: "PATCH", path: resourcePath(r, ns, name), body: p.body, contentType: "application/merge-patch+json", ...acceptFor(options) },
        r
      ),

    delete: (r, ns, name, options = {}) =>
      send({
        verb: "delete",
        target: targetOf(r, ns, name),
        method: "DELETE",
        path: resourcePath(r, ns, name),
        body: { kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds: options.gracePeriodSeconds, preconditions: options.preconditions }
      }).pipe(Effect.asVoid),

    watch: (r, ns, options) =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const req: Request = {
            verb: "watch",
            target: targetOf(r, ns),
            method: "GET",
            path: resourcePath(r, ns),
            query: {
              watch: "true",
              resourceVersion: options.resourceVersion,
              allowWatchBookmarks: "true",
              timeoutSeconds: options.timeoutSeconds,
              labelSelector: options.labelSelector,
              fieldSelector: options.fieldSelector
            }
          }
          const url = urlOf(transport.server, req.path, req.query)
          const headers = yield* limiter(headersFor(req, url))
          // Our own controller, aborted when the stream's scope closes (the consumer stopped or was interrupted).
          const controller = new AbortController()
          yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
          const res = yield* Effect.tryPromise({
            try: () => fetch(url, { method: "GET", headers, dispatcher: transport.dispatcher, signal: controller.signal }),
            catch: (e) => errorFromFailure(req.verb, req.target, e)
          }).pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => timedOut(req.verb, req.target) }))
          if (res.status !== 200 || res.body === null) {
            const text = yield* Effect.promise(() => res.text().catch(() => "")).pipe(Effect.timeoutTo({ duration: timeout, onSuccess: (t) => t, onTimeout: () => "" }))
            return yield* Effect.fail(errorFromResponse(req.verb, req.target, res.status, text))
          }
          // The server ends the watch after timeoutSeconds; silence well beyond that means a dead connection.
          const idle = Duration.seconds((options.timeoutSeconds ?? 300) + 60)
          return watchEvents(res.body.getReader(), req.target, idle)
        })
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
    const limiter = yield* makeRateLimiter(config.apiQps, config.apiBurst)
    yield* Effect.logDebug(`Kubernetes API ${transport.server} (from ${resolved.source})`)
    return makeLiveKubeApi({ transport, limiter, requestTimeout: config.requestTimeout })
  })
)
