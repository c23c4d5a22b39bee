/**
 * KubeApi over a real API server. client-node resolves the kubeconfig and signs each request
 * (bearer, exec and token-file credentials); the requests themselves go through ONE long-lived
 * keep-alive undici Agent (client-node would build a new Agent, so a new TLS handshake, per
 * request), behind the opt-in client-side token bucket (--api-qps) and a per-request timeout. HTTP
 * statuses and network failures become KubeError reasons here and nowhere else; what to do about
 * a 429 or a Retry-After is ApiFlow.ts's.
 */
import type { HttpMethod } from "@kubernetes/client-node/dist/gen/http/http.js"
import { Duration, Effect, Layer, type RateLimiter, Stream } from "effect"
import { fetch, interceptors, request } from "undici"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type KubeApiShape, type KubeObject, type ListResult, type ReadOptions, malformed } from "./KubeApi.ts"
import { KubeError } from "./KubeError.ts"
import { type Resource, apiVersionOf, resourcePath } from "./resources.ts"
import { type KubeConfigError, errorText, resolveKubeConfig, sourcesFrom } from "./live/kubeconfig.ts"
import { type Transport, errorFromFailure, errorFromResponse, makeRateLimiter, makeTransport, targetOf } from "./live/transport.ts"
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

  // API Priority and Fairness names the flow schema and priority level that classified a request
  // in two response headers: logged at debug the first time a pair is seen, and with every 429,
  // so an operator can tell which APF configuration throttles the controller.
  const flows = new Set<string>()
  const priorityAndFairness = (req: Request, status: number, flow: { readonly schema: string | undefined; readonly level: string | undefined }) => {
    if (flow.schema === undefined && flow.level === undefined) return Effect.void
    const key = `${flow.schema}/${flow.level}`
    if (status !== 429 && flows.has(key)) return Effect.void
    flows.add(key)
    return Effect.logDebug(status === 429 ? "API Priority and Fairness rejected a request (429)" : "API Priority and Fairness classifies requests").pipe(
      Effect.annotateLogs({ verb: req.verb, target: req.target, flowSchemaUID: flow.schema ?? "", priorityLevelUID: flow.level ?? "" })
    )
  }

  /** One attempt, through the limiter: the answer's status, body, Retry-After and APF headers. */
  const attempt = (req: Request) =>
    limiter(
      Effect.gen(function* () {
        const url = urlOf(transport.server, req.path, req.query)
        const headers = yield* headersFor(req, url)
        const body = req.body === undefined ? {} : { body: JSON.stringify(req.body) }
        return yield* Effect.tryPromise({
          try: async (signal) => {
            // undici closes an HTTP/1.1 connection after a body on a method that does not expect
            // one; a DELETE carries DeleteOptions, which the API server reads: its connection stays.
            const keep = req.method === "DELETE" && req.body !== undefined ? { reset: false } : {}
            const r = await request(url, { method: req.method, headers, ...body, ...keep, dispatcher: requests, signal })
            const header = (name: string) => {
              const v = r.headers[name]
              return Array.isArray(v) ? v[0] : v
            }
            return {
              status: r.statusCode,
              text: await r.body.text(),
              retryAfter: header("retry-after"),
              flow: { schema: header("x-kubernetes-pf-flowschema-uid"), level: header("x-kubernetes-pf-prioritylevel-uid") }
            }
          },
          catch: (e) => errorFromFailure(req.verb, req.target, e)
        }).pipe(
          Effect.timeoutFail({ duration: timeout, onTimeout: () => timedOut(req.verb, req.target) }),
          Effect.tap((res) => priorityAndFairness(req, res.status, res.flow))
        )
      })
    )

  /**
   * The parsed JSON body of a 2xx answer (undefined when empty); any other answer is a KubeError
   * carrying the Retry-After the server sent, which ApiFlow.ts honours.
   */
  const send = (req: Request): Effect.Effect<unknown, KubeError> =>
    Effect.flatMap(attempt(req), (res) => {
      if (res.status >= 200 && res.status <= 299) {
        if (res.text === "") return Effect.succeed(undefined)
        return Effect.try({ try: () => JSON.parse(res.text) as unknown, catch: () => malformed(req.verb, req.target, "body is not JSON") })
      }
      return Effect.fail(errorFromResponse(req.verb, req.target, res.status, res.text, res.retryAfter))
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
            return yield* Effect.fail(errorFromResponse(req.verb, req.target, res.status, text, res.headers.get("retry-after")))
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
