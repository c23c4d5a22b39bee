/**
 * One request to the API server as KubeApiLive sends it: signed by the kubeconfig's credentials,
 * through the client-side limiter, with a timeout; a non-2xx answer or a network failure as a
 * KubeError. Watches open here too and become a stream of events (watch.ts).
 */
import type { HttpMethod } from "@kubernetes/client-node/dist/gen/http/http.js"
import { Duration, Effect, FiberRef, LogLevel, type RateLimiter, type Scope, type Stream } from "effect"
import { fetch, request } from "undici"
import { type WatchEvent, malformed } from "../KubeApi.ts"
import { KubeError } from "../KubeError.ts"
import { errorText } from "./kubeconfig.ts"
import { makeReachability } from "./reachability.ts"
import { type Transport, errorFromFailure, errorFromResponse } from "./transport.ts"
import { watchEvents } from "./watch.ts"

export interface Request {
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

export interface Requester {
  /** The parsed JSON body of a 2xx answer (undefined when empty); any other answer is a KubeError carrying its Retry-After. */
  readonly send: (req: Request) => Effect.Effect<unknown, KubeError>
  /** A watch's events until the server ends it, or a KubeError; silence past `idle` counts as a dead connection. */
  readonly watch: (req: Request, idle: Duration.Duration) => Effect.Effect<Stream.Stream<WatchEvent, KubeError>, KubeError, Scope.Scope>
}

const urlOf = (server: string, p: string, query: Request["query"] = {}): string => {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") params.set(k, String(v))
  const qs = params.toString()
  return `${server}${p}${qs === "" ? "" : `?${qs}`}`
}

interface Answer {
  readonly status: number
  readonly text: string
  readonly retryAfter: string | undefined
  readonly flow: { readonly schema: string | undefined; readonly level: string | undefined }
}

/**
 * The flow schema and priority level API Priority and Fairness names in two response headers: logged at
 * debug the first time a pair is seen and with every 429, so that an operator can tell which throttles.
 */
const makeFlowLog = () => {
  const seen = new Set<string>()
  return (req: Request, res: Answer) => {
    const { schema, level } = res.flow
    if (schema === undefined && level === undefined) return Effect.void
    const key = `${schema}/${level}`
    if (res.status !== 429 && seen.has(key)) return Effect.void
    return Effect.flatMap(FiberRef.get(FiberRef.currentMinimumLogLevel), (minimum) => {
      // A pair counts as seen once it was logged, not while debug lines are off.
      if (LogLevel.greaterThan(minimum, LogLevel.Debug)) return Effect.void
      seen.add(key)
      return Effect.logDebug(res.status === 429 ? "API Priority and Fairness rejected a request (429)" : "API Priority and Fairness classifies requests").pipe(
        Effect.annotateLogs({ verb: req.verb, target: req.target, flowSchemaUID: schema ?? "", priorityLevelUID: level ?? "" })
      )
    })
  }
}

/** The headers of a request: its credentials (from client-node), what it accepts and sends. */
const headersFor = async (transport: Transport, url: string, req: Request): Promise<Record<string, string>> => ({
  ...(await transport.headers(url, req.method)),
  Accept: req.accept ?? "application/json",
  "User-Agent": "whereabouts-controller",
  // Uncompressed: next to the API server gzip costs CPU on both ends for nothing (BENCHMARKS.md's
  // Decisions); said outright, as fetch (watches) would ask for gzip.
  "Accept-Encoding": "identity",
  ...(req.body === undefined ? {} : { "Content-Type": req.contentType ?? "application/json" })
})

const unauthorized = (req: Request, e: unknown) => new KubeError({ reason: "Unauthorized", verb: req.verb, target: req.target, detail: `credentials: ${errorText(e)}`, cause: e })

/** One undici request; its answer read whole. */
const exchange = async (dispatcher: Transport["dispatcher"], url: string, req: Request, headers: Record<string, string>, signal: AbortSignal): Promise<Answer> => {
  const body = req.body === undefined ? {} : { body: JSON.stringify(req.body) }
  // undici closes an HTTP/1.1 connection after a body on a method that does not expect one; a
  // DELETE carries DeleteOptions, which the API server reads: its connection stays.
  const keep = req.method === "DELETE" && req.body !== undefined ? { reset: false } : {}
  const r = await request(url, { method: req.method, headers, ...body, ...keep, dispatcher, signal })
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
}

/** Credentials, then the exchange, until `signal` aborts it: the answer, or why there is none. */
const answer = (transport: Transport, req: Request, signal: AbortSignal): Promise<Answer | KubeError> => {
  const url = urlOf(transport.server, req.path, req.query)
  return headersFor(transport, url, req).then(
    (headers) => exchange(transport.dispatcher, url, req, headers, signal).catch((e: unknown) => errorFromFailure(req.verb, req.target, e)),
    (e: unknown) => unauthorized(req, e)
  )
}

/** The requests and watches of one transport; each attempt tells `reach` whether the server answered. */
export const makeRequester = (transport: Transport, limiter: RateLimiter.RateLimiter, requestTimeout: Duration.DurationInput): Requester => {
  const reach = makeReachability(transport.server)
  const timeout = Duration.decode(requestTimeout)
  const timeoutMillis = Duration.toMillis(timeout)
  const timedOut = (req: Request) => new KubeError({ reason: "Timeout", verb: req.verb, target: req.target, detail: `no answer within ${Duration.format(timeout)}` })
  const noAnswer = (e: KubeError) => Effect.zipRight(reach.failed(e), Effect.fail(e))
  const flowLog = makeFlowLog()

  /**
   * One attempt, through the limiter, under one timer that aborts it (an interruption aborts it
   * too): a callback, not a fiber per request, as requests are the controller's hot path.
   */
  const attempt = (req: Request) =>
    limiter(
      Effect.async<Answer, KubeError>((resume) => {
        const aborter = new AbortController()
        let settled = false
        // The first of the answer and the timer settles it: credentials that never come (a hung
        // exec plugin) time out as an exchange does.
        const settle = (outcome: Effect.Effect<Answer, KubeError>) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          resume(outcome)
        }
        const timer = setTimeout(() => {
          aborter.abort()
          settle(noAnswer(timedOut(req)))
        }, timeoutMillis)
        void answer(transport, req, aborter.signal).then((a) =>
          settle(a instanceof KubeError ? noAnswer(a) : reach.answered.pipe(Effect.zipRight(flowLog(req, a)), Effect.as(a)))
        )
        return Effect.sync(() => {
          settled = true
          clearTimeout(timer)
          aborter.abort()
        })
      })
    )

  const send = (req: Request): Effect.Effect<unknown, KubeError> =>
    Effect.flatMap(attempt(req), (res) => {
      if (res.status >= 200 && res.status <= 299) {
        if (res.text === "") return Effect.succeed(undefined)
        return Effect.try({ try: () => JSON.parse(res.text) as unknown, catch: (e) => malformed(req.verb, req.target, "body is not JSON", e) })
      }
      return Effect.fail(errorFromResponse(req.verb, req.target, res.status, res.text, res.retryAfter))
    })

  const watch = (req: Request, idle: Duration.Duration) =>
    Effect.gen(function* () {
      const url = urlOf(transport.server, req.path, req.query)
      const headers = yield* limiter(Effect.tryPromise({ try: () => headersFor(transport, url, req), catch: (e) => unauthorized(req, e) }))
      // Our own controller, aborted when the stream's scope closes (the consumer stopped or was interrupted).
      const controller = new AbortController()
      yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
      // fetch, whose body reads as a web stream; requests use undici's request API, as fetch costs
      // several times the CPU per request (WHATWG Request/Response/stream objects).
      const res = yield* Effect.tryPromise({
        try: () => fetch(url, { method: "GET", headers, dispatcher: transport.dispatcher, signal: controller.signal }),
        catch: (e) => errorFromFailure(req.verb, req.target, e)
      }).pipe(
        Effect.timeoutFail({ duration: timeout, onTimeout: () => timedOut(req) }),
        Effect.tapBoth({ onFailure: reach.failed, onSuccess: () => reach.answered })
      )
      if (res.status !== 200 || res.body === null) {
        const text = yield* Effect.promise(() => res.text().catch(() => "")).pipe(Effect.timeoutTo({ duration: timeout, onSuccess: (t) => t, onTimeout: () => "" }))
        return yield* Effect.fail(errorFromResponse(req.verb, req.target, res.status, text, res.headers.get("retry-after")))
      }
      return watchEvents(res.body.getReader(), req.target, idle)
    })

  return { send, watch }
}
