/**
 * Whether the API server can be reached, said once per change ("cannot reach … since …", "reached …
 * again after …"): while it is down everything fails together, and a line per failed attempt would
 * bury that one fact. Callers log their own failed attempts at debug (`isUnreachable`).
 */
import { Effect, FiberRef, HashMap } from "effect"
import { type KubeError, isUnreachable } from "../KubeError.ts"

/** What the network said, in words: the errno/undici/TLS code errorFromFailure puts in front of its detail. */
const CODES: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  EPIPE: "connection reset",
  ENOTFOUND: "no such host",
  EAI_AGAIN: "DNS lookup failed",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ETIMEDOUT: "connection timed out",
  UND_ERR_CONNECT_TIMEOUT: "connection timed out",
  UND_ERR_SOCKET: "connection closed by the other side"
}

/** A TLS failure's code: a certificate problem (CERT_HAS_EXPIRED, DEPTH_ZERO_SELF_SIGNED_CERT, …) or a handshake that broke. */
const TLS_CODE = /CERT|TLS|SSL|^EPROTO$|SIGNATURE|ISSUER/

/** Why an attempt got no answer, short: "connection refused", "TLS handshake failed: …", "no answer within 30s". */
export const unreachableReason = (e: KubeError): string => {
  const m = /^([A-Z][A-Z0-9_]+): (.*)$/s.exec(e.detail)
  if (m === null) return e.detail
  const [, code = "", rest = ""] = m
  const known = CODES[code]
  if (known !== undefined) return known
  return TLS_CODE.test(code) ? `TLS handshake failed: ${rest}` : e.detail
}

/** A wall-clock time of day, local, as a person reads it next to their own clock: 12:00:01. */
export const timeOfDay = (ms: number): string => new Date(ms).toTimeString().slice(0, 8)

/** An outage's length, rounded to what matters: "25 s", "3 min 5 s", "2 h 4 min". */
export const outageLength = (ms: number): string => {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 120) return `${s} s`
  if (s < 7200) return `${Math.floor(s / 60)} min ${s % 60} s`
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
}

export interface Reachability {
  /** An attempt got an HTTP answer, whatever its status. */
  readonly answered: Effect.Effect<void>
  /** An attempt failed; only failures without an answer (`isUnreachable`) count. */
  readonly failed: (e: KubeError) => Effect.Effect<void>
}

type State = { readonly _tag: "Unknown" } | { readonly _tag: "Reachable" } | { readonly _tag: "Unreachable"; readonly since: number; readonly wasReached: boolean }
const REACHABLE: State = { _tag: "Reachable" }

/**
 * The reporter of one API server. Its state is plain (not a Ref): it is read on every request, and
 * each transition is decided and recorded in one synchronous step (the clock read with it), so two
 * fibers never both log one. Its lines carry no annotations of the fiber that happened to report
 * first (an informer's, the lease's): the server's state is nobody's in particular.
 */
export const makeReachability = (server: string): Reachability => {
  let state: State = { _tag: "Unknown" }
  const alone = <A, E, R>(log: Effect.Effect<A, E, R>) => Effect.locally(log, FiberRef.currentLogAnnotations, HashMap.empty())
  const answered = Effect.clockWith((clock) => {
    const previous = state
    state = REACHABLE
    if (previous._tag !== "Unreachable") return Effect.void
    const again = previous.wasReached ? " again" : ""
    return alone(Effect.logInfo(`reached ${server}${again} after ${outageLength(clock.unsafeCurrentTimeMillis() - previous.since)}`).pipe(Effect.annotateLogs({ server })))
  })
  const failed = (e: KubeError) =>
    Effect.clockWith((clock) => {
      if (state._tag === "Unreachable" || !isUnreachable(e)) return Effect.void
      const since = clock.unsafeCurrentTimeMillis()
      state = { _tag: "Unreachable", since, wasReached: state._tag === "Reachable" }
      return alone(Effect.logWarning(`cannot reach ${server} since ${timeOfDay(since)}: ${unreachableReason(e)}`).pipe(Effect.annotateLogs({ server, error: e.message })))
    })
  return { answered, failed }
}
