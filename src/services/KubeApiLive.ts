/**
 * KubeApi over a real API server. client-node resolves the kubeconfig and signs each request
 * (bearer, exec and token-file credentials); the requests themselves go through ONE long-lived
 * keep-alive undici Agent (client-node would build a new Agent, so a new TLS handshake, per
 * request), behind a client-side token-bucket rate limiter and a per-request timeout. HTTP
 * statuses and network failures become KubeError reasons here and nowhere else.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type HttpMethod, KubeConfig, RequestContext } from "@kubernetes/client-node"
import { Chunk, Config, Data, Duration, Effect, Layer, Option, RateLimiter, type Scope, Stream } from "effect"
import { Agent, type Dispatcher, ProxyAgent, fetch } from "undici"
import { ControllerConfig } from "./ControllerConfig.ts"
import { KubeApi, type KubeApiShape, type KubeObject, type ListResult, type WatchEvent, malformed, objectKey } from "./KubeApi.ts"
import { KubeError, type KubeErrorReason, reasonForStatus } from "./KubeError.ts"
import { type Resource, apiVersionOf, resourcePath } from "./resources.ts"

// ---------------------------------------------------------------------------------------------
// Kubeconfig resolution

export interface KubeConfigAttempt {
  readonly source: string
  readonly problem: string
}

/** No usable client configuration: says which sources were tried and what was wrong with each. */
export class KubeConfigError extends Data.TaggedError("KubeConfigError")<{ readonly attempts: ReadonlyArray<KubeConfigAttempt> }> {
  override get message(): string {
    const tried = this.attempts.map((a, i) => `(${i + 1}) ${a.source}: ${a.problem}`).join("; ")
    return `no usable Kubernetes API configuration. Tried ${tried}`
  }
}

export interface KubeConfigSources {
  /** `--kubeconfig` / `KUBECONFIG`: a path, or several separated by `path.delimiter`. */
  readonly explicit: string | undefined
  readonly home: string | undefined
  /** `KUBERNETES_SERVICE_HOST`; client-node's loadFromCluster reads it (and the port) itself. */
  readonly serviceHost: string | undefined
  /** Prefix of /var/run/secrets/kubernetes.io/serviceaccount (tests only). */
  readonly serviceAccountPrefix?: string
}

export interface ResolvedKubeConfig {
  readonly kc: KubeConfig
  readonly source: string
  readonly tried: ReadonlyArray<KubeConfigAttempt>
}

const SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e)).split("\n")[0]!

/** What is wrong with a loaded config, if anything: a current context naming a cluster with a server. */
const problemOf = (kc: KubeConfig): string | undefined => {
  if (!kc.getCurrentContext()) return "no current-context"
  const cluster = kc.getCurrentCluster()
  if (cluster === null) return `current-context "${kc.getCurrentContext()}" names no known cluster`
  try {
    const url = new URL(cluster.server)
    return url.protocol === "https:" || url.protocol === "http:" ? undefined : `server ${cluster.server} is not http(s)`
  } catch {
    return `cluster "${cluster.name}" has no valid server URL (${JSON.stringify(cluster.server ?? "")})`
  }
}

/** Several files merge as kubectl merges them: the first file's current-context, the first of each name. */
const loadFiles = (files: ReadonlyArray<string>): KubeConfig => {
  const kc = new KubeConfig()
  kc.loadFromFile(files[0]!)
  for (const file of files.slice(1)) {
    const more = new KubeConfig()
    more.loadFromFile(file)
    const has = (list: ReadonlyArray<{ readonly name: string }>, name: string) => list.some((x) => x.name === name)
    for (const c of more.getClusters()) if (!has(kc.getClusters(), c.name)) kc.addCluster(c)
    for (const u of more.getUsers()) if (!has(kc.getUsers(), u.name)) kc.addUser(u)
    for (const c of more.getContexts()) if (!has(kc.getContexts(), c.name)) kc.addContext(c)
    if (!kc.getCurrentContext()) kc.setCurrentContext(more.getCurrentContext())
  }
  return kc
}

/**
 * The explicit kubeconfig, else `~/.kube/config`, else the in-cluster service account; never
 * client-node's silent http://localhost:8080. A source that exists but is broken is an error, not
 * a reason to try the next one (that could point the controller at another cluster).
 */
export const resolveKubeConfig = (sources: KubeConfigSources): Effect.Effect<ResolvedKubeConfig, KubeConfigError> =>
  Effect.suspend(() => {
    const tried: Array<KubeConfigAttempt> = []
    const fail = (source: string, problem: string) => Effect.fail(new KubeConfigError({ attempts: [...tried, { source, problem }] }))
    const use = (source: string, load: () => KubeConfig) => {
      let kc: KubeConfig
      try {
        kc = load()
      } catch (e) {
        return fail(source, errorText(e))
      }
      const problem = problemOf(kc)
      return problem === undefined ? Effect.succeed({ kc, source, tried }) : fail(source, problem)
    }

    const files = (sources.explicit ?? "").split(path.delimiter).filter((f) => f !== "")
    if (files.length > 0) {
      const source = `KUBECONFIG/--kubeconfig (${files.join(path.delimiter)})`
      const missing = files.filter((f) => !fs.existsSync(f))
      if (missing.length > 0) {
        return fail(source, `no such file: ${missing.join(", ")} (given explicitly, so ~/.kube/config and the in-cluster service account were not tried)`)
      }
      return use(source, () => loadFiles(files))
    }
    tried.push({ source: "KUBECONFIG/--kubeconfig", problem: "not set" })

    const home = sources.home === undefined || sources.home === "" ? undefined : path.join(sources.home, ".kube", "config")
    if (home !== undefined && fs.existsSync(home)) return use(`~/.kube/config (${home})`, () => loadFiles([home]))
    tried.push({ source: `~/.kube/config${home === undefined ? "" : ` (${home})`}`, problem: home === undefined ? "no home directory" : "no such file" })

    const prefix = sources.serviceAccountPrefix ?? ""
    const source = "in-cluster service account"
    if (sources.serviceHost === undefined || sources.serviceHost === "") return fail(source, "KUBERNETES_SERVICE_HOST is not set (not running in a pod)")
    if (!fs.existsSync(`${prefix}${SA_TOKEN}`)) return fail(source, `no token at ${prefix}${SA_TOKEN} (automountServiceAccountToken off?)`)
    return use(source, () => {
      const kc = new KubeConfig()
      kc.loadFromCluster(prefix)
      return kc
    })
  })

// ---------------------------------------------------------------------------------------------
// Errors

const MAX_DETAIL = 1_000
const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "ETIMEDOUT"])

/** `<plural> <ns>/<name>`, or the plural alone for collections — as the in-memory cluster says it. */
export const targetOf = (r: Resource, namespace: string | undefined, name?: string): string =>
  name === undefined ? r.plural : `${r.plural} ${objectKey(namespace, name)}`

/** A non-2xx answer: the Status object's message when the body is one, else the body text. */
export const errorFromResponse = (verb: string, target: string, status: number, body: string): KubeError => {
  let detail = body.trim()
  try {
    const parsed = JSON.parse(body) as { kind?: unknown; message?: unknown }
    if (parsed?.kind === "Status" && typeof parsed.message === "string") detail = parsed.message
  } catch {
    // not JSON: keep the text
  }
  if (detail === "") detail = `HTTP ${status}`
  return new KubeError({ reason: reasonForStatus(status, verb), verb, target, status, detail: detail.slice(0, MAX_DETAIL) })
}

/** A request that got no HTTP answer: network and TLS failures are Unavailable, undici's timeouts Timeout. */
export const errorFromFailure = (verb: string, target: string, failure: unknown): KubeError => {
  const messages: Array<string> = []
  let code: string | undefined
  let timeout = false
  for (let e: unknown = failure, depth = 0; e instanceof Error && depth < 6; e = e.cause, depth++) {
    if (e.name === "AbortError" || e.name === "TimeoutError") timeout = true
    const c = (e as { code?: unknown }).code
    if (code === undefined && typeof c === "string") code = c
    if (e.message !== "" && !messages.includes(e.message)) messages.push(e.message)
  }
  let reason: KubeErrorReason
  if (timeout || (code !== undefined && TIMEOUT_CODES.has(code))) reason = "Timeout"
  else if (code !== undefined || failure instanceof TypeError) reason = "Unavailable"
  else reason = "Unknown"
  const text = messages.join(": ") || String(failure)
  return new KubeError({ reason, verb, target, detail: (code === undefined ? text : `${code}: ${text}`).slice(0, MAX_DETAIL) })
}

// ---------------------------------------------------------------------------------------------
// Transport

export interface Transport {
  readonly server: string
  readonly dispatcher: Dispatcher
  /** Auth headers for one request (bearer, exec or token-file credentials, refreshed by client-node). */
  readonly headers: (url: string, method: HttpMethod) => Promise<Record<string, string>>
}

interface TlsOptions {
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
  rejectUnauthorized?: boolean
  servername?: string
}

/** TLS material of the current context, plus client-node's validation (http:// needs insecure-skip-tls-verify). */
const connectionOptions = (resolved: ResolvedKubeConfig): Effect.Effect<TlsOptions, KubeConfigError> =>
  Effect.tryPromise({
    try: async () => {
      const opts: TlsOptions = {}
      await resolved.kc.applyToHTTPSOptions(opts)
      const tls: TlsOptions = {}
      if (opts.ca !== undefined) tls.ca = opts.ca
      if (opts.cert !== undefined) tls.cert = opts.cert
      if (opts.key !== undefined) tls.key = opts.key
      if (opts.rejectUnauthorized !== undefined) tls.rejectUnauthorized = opts.rejectUnauthorized
      if (opts.servername !== undefined) tls.servername = opts.servername
      return tls
    },
    catch: (e) =>
      new KubeConfigError({
        attempts: [...resolved.tried, { source: resolved.source, problem: `loaded, but its credentials or TLS files are unusable: ${errorText(e)}` }]
      })
  })

/** The transport of a resolved kubeconfig: one keep-alive Agent, closed with the scope. */
export const makeTransport = (resolved: ResolvedKubeConfig): Effect.Effect<Transport, KubeConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const tls = yield* connectionOptions(resolved)
    const cluster = resolved.kc.getCurrentCluster()!
    // Keep-alive probes after 30 s, as client-go and client-node do; watches may be quiet for minutes,
    // so no body timeout (requests have their own timeout, watches their own idle limit).
    const connect = { ...tls, keepAlive: true, keepAliveInitialDelay: 30_000 }
    const options = { connect, keepAliveTimeout: 30_000, bodyTimeout: 0 }
    const dispatcher = yield* Effect.acquireRelease(
      Effect.try({
        try: (): Dispatcher =>
          cluster.proxyUrl === undefined || cluster.proxyUrl === ""
            ? new Agent(options)
            : new ProxyAgent({ ...options, uri: cluster.proxyUrl, requestTls: tls }),
        catch: (e) => new KubeConfigError({ attempts: [...resolved.tried, { source: resolved.source, problem: `proxy-url: ${errorText(e)}` }] })
      }),
      (d) => Effect.promise(() => d.destroy().catch(() => undefined))
    )
    const server = cluster.server.replace(/\/+$/, "")
    const headers = async (url: string, method: HttpMethod) => {
      const ctx = new RequestContext(url, method)
      await resolved.kc.applySecurityAuthentication(ctx)
      return ctx.getHeaders()
    }
    return { server, dispatcher, headers }
  })

/** client-go's token bucket: `burst` at once, then `qps` per second. qps ≤ 0 turns limiting off. */
export const makeRateLimiter = (qps: number, burst: number): Effect.Effect<RateLimiter.RateLimiter, never, Scope.Scope> =>
  !(qps > 0) || !Number.isFinite(qps)
    ? Effect.succeed((effect) => effect)
    : RateLimiter.make({ limit: Math.max(1, Math.floor(burst)), interval: Duration.millis((Math.max(1, Math.floor(burst)) / qps) * 1000), algorithm: "token-bucket" })

// ---------------------------------------------------------------------------------------------
// Requests

interface Request {
  readonly verb: string
  readonly target: string
  readonly method: HttpMethod
  readonly path: string
  readonly query?: Readonly<Record<string, string | number | undefined>>
  readonly body?: unknown
  readonly contentType?: string
}

const USER_AGENT = "whereabouts-controller"

const urlOf = (server: string, p: string, query: Request["query"] = {}): string => {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") params.set(k, String(v))
  const qs = params.toString()
  return `${server}${p}${qs === "" ? "" : `?${qs}`}`
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const isKubeObject = (u: unknown): u is KubeObject => isObject(u) && isObject(u["metadata"])

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
        Accept: "application/json",
        "User-Agent": USER_AGENT,
        ...(req.body === undefined ? {} : { "Content-Type": req.contentType ?? "application/json" })
      }))
    )

  /** The parsed JSON body of a 2xx answer (undefined when empty). */
  const send = (req: Request): Effect.Effect<unknown, KubeError> =>
    limiter(
      Effect.gen(function* () {
        const url = urlOf(transport.server, req.path, req.query)
        const headers = yield* headersFor(req, url)
        const body = req.body === undefined ? {} : { body: JSON.stringify(req.body) }
        const res = yield* Effect.tryPromise({
          try: async (signal) => {
            const r = await fetch(url, { method: req.method, headers, ...body, dispatcher: transport.dispatcher, signal })
            return { status: r.status, text: await r.text() }
          },
          catch: (e) => errorFromFailure(req.verb, req.target, e)
        }).pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => timedOut(req.verb, req.target) }))
        if (res.status < 200 || res.status > 299) return yield* Effect.fail(errorFromResponse(req.verb, req.target, res.status, res.text))
        if (res.text === "") return undefined
        return yield* Effect.try({ try: () => JSON.parse(res.text) as unknown, catch: () => malformed(req.verb, req.target, "body is not JSON") })
      })
    )

  const object = (req: Request, r: Resource) =>
    Effect.flatMap(send(req), (u) =>
      isKubeObject(u) ? Effect.succeed(withTypeMeta(r, u)) : Effect.fail(malformed(req.verb, req.target, "expected an object with metadata"))
    )

  return {
    get: (r, ns, name) => object({ verb: "get", target: targetOf(r, ns, name), method: "GET", path: resourcePath(r, ns, name) }, r),

    list: (r, ns, options = {}) => {
      const req: Request = {
        verb: "list",
        target: targetOf(r, ns),
        method: "GET",
        path: resourcePath(r, ns),
        query: { limit: options.limit, continue: options.continue, labelSelector: options.labelSelector, fieldSelector: options.fieldSelector }
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

    patch: (r, ns, name, p) =>
      object(
        p.type === "json"
          ? { verb: "patch", target: targetOf(r, ns, name), method: "PATCH", path: resourcePath(r, ns, name), body: p.ops, contentType: "application/json-patch+json" }
          : { verb: "patch", target: targetOf(r, ns, name), method: "PATCH", path: resourcePath(r, ns, name), body: p.body, contentType: "application/merge-patch+json" },
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

type Pull = Effect.Effect<Chunk.Chunk<WatchEvent>, Option.Option<KubeError>>

/**
 * Newline-delimited watch events. The stream ends when the server closes the response, when the
 * connection drops mid-stream or stays silent past `idle` (as client-go's StreamWatcher does: the
 * consumer resumes from its last version); an ERROR event fails it (410 → "Gone").
 */
export const watchEvents = (reader: ReadableStreamDefaultReader<Uint8Array>, target: string, idle: Duration.Duration): Stream.Stream<WatchEvent, KubeError> => {
  const decoder = new TextDecoder()
  let buffer = ""
  let pending: KubeError | undefined
  const end: Pull = Effect.fail(Option.none())
  const parse = (line: string): WatchEvent | KubeError | undefined => {
    let e: { type?: unknown; object?: unknown }
    try {
      e = JSON.parse(line) as typeof e
    } catch {
      return malformed("watch", target, `event is not JSON: ${line.slice(0, 200)}`)
    }
    const o = e.object
    switch (e.type) {
      case "ADDED":
      case "MODIFIED":
      case "DELETED":
        return isKubeObject(o) ? { type: e.type, object: o } : malformed("watch", target, `${e.type} event without an object`)
      case "BOOKMARK": {
        const rv = isKubeObject(o) ? o.metadata.resourceVersion : undefined
        return typeof rv === "string" ? { type: "BOOKMARK", resourceVersion: rv } : undefined
      }
      case "ERROR": {
        const status = isObject(o) ? o : {}
        const code = typeof status["code"] === "number" ? status["code"] : undefined
        return new KubeError({
          reason: code === undefined ? "Unknown" : reasonForStatus(code, "watch"),
          verb: "watch",
          target,
          status: code,
          detail: typeof status["message"] === "string" ? status["message"] : JSON.stringify(o ?? null).slice(0, MAX_DETAIL)
        })
      }
      default:
        return undefined
    }
  }
  const pull: Pull = Effect.suspend(() => {
    if (pending !== undefined) return Effect.fail(Option.some(pending))
    return Effect.tryPromise(() => reader.read()).pipe(
      Effect.timeout(idle),
      Effect.matchEffect({
        onFailure: () => end, // dropped connection, or silence: a normal end
        onSuccess: ({ done, value }): Pull => {
          if (done) return end
          buffer += decoder.decode(value, { stream: true })
          const lines = buffer.split("\n")
          buffer = lines.pop()!
          const events: Array<WatchEvent> = []
          for (const line of lines) {
            if (line.trim() === "") continue
            const parsed = parse(line)
            if (parsed instanceof KubeError) {
              pending = parsed
              break
            }
            if (parsed !== undefined) events.push(parsed)
          }
          if (events.length > 0) return Effect.succeed(Chunk.unsafeFromArray(events))
          return pull
        }
      })
    )
  })
  return Stream.repeatEffectChunkOption(pull)
}

// ---------------------------------------------------------------------------------------------
// Layer

/** Where the kubeconfig comes from: ControllerConfig's path, HOME, and the in-cluster variables. */
const sourcesFrom = (explicit: string | undefined): Effect.Effect<KubeConfigSources> =>
  Config.all({
    home: Config.option(Config.nonEmptyString("HOME")),
    serviceHost: Config.option(Config.nonEmptyString("KUBERNETES_SERVICE_HOST"))
  }).pipe(
    Effect.orElseSucceed(() => ({ home: Option.none<string>(), serviceHost: Option.none<string>() })),
    Effect.map(({ home, serviceHost }) => ({
      explicit,
      home: Option.getOrElse(home, () => os.homedir()),
      serviceHost: Option.getOrUndefined(serviceHost)
    }))
  )

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
