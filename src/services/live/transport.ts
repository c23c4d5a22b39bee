/**
 * The wire under KubeApiLive: HTTP statuses and network failures translated into KubeError reasons
 * (here and nowhere else), and one long-lived keep-alive undici Agent per kubeconfig.
 */
import type { RequestOptions } from "node:https"
import { type HttpMethod, RequestContext } from "@kubernetes/client-node/dist/gen/http/http.js"
import { Effect, type Scope } from "effect"
import { Agent, type Dispatcher, ProxyAgent } from "undici"
import { objectKey } from "../KubeApi.ts"
import { KubeError, type KubeErrorReason, reasonForStatus } from "../KubeError.ts"
import type { Resource } from "../resources.ts"
import { KubeConfigError, type ResolvedKubeConfig, errorText } from "./kubeconfig.ts"

export const MAX_DETAIL = 1_000
const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "ETIMEDOUT"])

/** `<plural> <ns>/<name>`, or the plural alone for collections — as the in-memory cluster says it. */
export const targetOf = (r: Resource, namespace: string | undefined, name?: string): string =>
  name === undefined ? r.plural : `${r.plural} ${objectKey(namespace, name)}`

/** A non-2xx answer: the Status object's message when the body is one, else the body text. */
export const errorFromResponse = (verb: string, target: string, status: number, body: string, retryAfter?: string | null): KubeError => {
  let detail = body.trim()
  try {
    const parsed = JSON.parse(body) as { kind?: unknown; message?: unknown }
    if (parsed?.kind === "Status" && typeof parsed.message === "string") detail = parsed.message
  } catch {
    // not JSON: keep the text
  }
  if (detail === "") detail = `HTTP ${status}`
  const wait = retryAfterSeconds(status, retryAfter)
  return new KubeError({ reason: reasonForStatus(status, verb), verb, target, status, detail: detail.slice(0, MAX_DETAIL), ...(wait === undefined ? {} : { retryAfterSeconds: wait }) })
}

/** The Retry-After of a 429 or 5xx answer in whole seconds (kube-apiserver's form), as client-go reads it; else undefined. */
export const retryAfterSeconds = (status: number, header: string | null | undefined): number | undefined => {
  const seconds = header?.trim() ?? ""
  return (status === 429 || status >= 500) && /^\d{1,6}$/.test(seconds) ? Number(seconds) : undefined
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
  const reason: KubeErrorReason =
    timeout || (code !== undefined && TIMEOUT_CODES.has(code)) ? "Timeout" : code !== undefined || failure instanceof TypeError ? "Unavailable" : "Unknown"
  const text = messages.join(": ") || String(failure)
  return new KubeError({ reason, verb, target, detail: (code === undefined ? text : `${code}: ${text}`).slice(0, MAX_DETAIL), cause: failure })
}

export interface Transport {
  readonly server: string
  /** Requests and watches: one keep-alive HTTP/1.1 Agent. */
  readonly dispatcher: Dispatcher
  /** Auth headers for one request (bearer, exec or token-file credentials, refreshed by client-node). */
  readonly headers: (url: string, method: HttpMethod) => Promise<Record<string, string>>
}

const TLS_KEYS = ["ca", "cert", "key", "rejectUnauthorized", "servername"] as const
type TlsOptions = Pick<RequestOptions, (typeof TLS_KEYS)[number]>

/** The resolved kubeconfig turned out unusable after all: what was tried, then why this one is not. */
const unusable = (resolved: ResolvedKubeConfig, problem: string) => new KubeConfigError({ attempts: [...resolved.tried, { source: resolved.source, problem }] })

/** TLS material of the current context, plus client-node's validation (http:// needs insecure-skip-tls-verify). */
const connectionOptions = (resolved: ResolvedKubeConfig): Effect.Effect<TlsOptions, KubeConfigError> =>
  Effect.tryPromise({
    try: async () => {
      const opts: RequestOptions = {}
      await resolved.kc.applyToHTTPSOptions(opts)
      // The TLS material that is set, nothing else: client-node adds an agent of its own and basic auth.
      return Object.fromEntries(TLS_KEYS.flatMap((k) => (opts[k] === undefined ? [] : [[k, opts[k]]]))) as TlsOptions
    },
    catch: (e) => unusable(resolved, `loaded, but its credentials or TLS files are unusable: ${errorText(e)}`)
  })

/** The transport of a resolved kubeconfig: one keep-alive Agent, closed with the scope. */
export const makeTransport = (resolved: ResolvedKubeConfig): Effect.Effect<Transport, KubeConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const tls = yield* connectionOptions(resolved)
    const cluster = resolved.kc.getCurrentCluster()!
    // Keep-alive probes after 30 s, as client-go and client-node do; watches may be quiet for minutes,
    // so no body timeout (requests have their own timeout, watches their own idle limit).
    const connect = { ...tls, keepAlive: true, keepAliveInitialDelay: 30_000 }
    // HTTP/1.1 only: over h2 a watch can stall for good while requests run beside it (an informer blind
    // until its idle limit; test/live/kubeapi-live.test.ts), and Node's HTTP/2 session can spin at a shutdown.
    const options = { connect, allowH2: false, keepAliveTimeout: 30_000, bodyTimeout: 0 }
    const dispatcher = yield* Effect.acquireRelease(
      Effect.try({
        try: (): Dispatcher =>
          cluster.proxyUrl === undefined || cluster.proxyUrl === "" ? new Agent(options) : new ProxyAgent({ ...options, uri: cluster.proxyUrl, requestTls: tls }),
        catch: (e) => unusable(resolved, `proxy-url: ${errorText(e)}`)
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
