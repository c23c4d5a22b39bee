/**
 * The one error type of the Kubernetes boundary. Live layers translate HTTP status codes
 * and network failures into a `reason`; nothing above KubeApi looks at status codes.
 */
import { Data } from "effect"

export type KubeErrorReason =
  | "NotFound" // 404
  | "AlreadyExists" // 409 on create
  | "Conflict" // 409 on update (stale resourceVersion)
  | "Invalid" // 422: schema validation, or a JSON-patch `test` that failed
  | "BadRequest" // 400
  | "Unauthorized" // 401
  | "Forbidden" // 403 (RBAC)
  | "Gone" // 410: resourceVersion too old (watch/list continue)
  | "TooManyRequests" // 429
  | "Timeout" // 504, or the request timed out
  | "Unavailable" // 5xx, connection refused/reset, DNS failure
  | "Unknown"

export class KubeError extends Data.TaggedError("KubeError")<{
  readonly reason: KubeErrorReason
  readonly verb: string
  /** e.g. "pods", "ippools"; with the object name when there is one: "ippools kube-system/10.0.0.0-24". */
  readonly target: string
  readonly status?: number | undefined
  readonly detail: string
  /**
   * The Retry-After of a 429 or 5xx answer, in seconds: the server said when to try again
   * (ApiFlow.ts waits that long, and for a 429 pauses that kind of work).
   */
  readonly retryAfterSeconds?: number | undefined
  /** What failed underneath (a network error, a credential plugin's, a JSON parse), for the log and a debugger. */
  readonly cause?: unknown
}> {
  override get message(): string {
    return `${this.verb} ${this.target}: ${this.reason}${this.status === undefined ? "" : ` (HTTP ${this.status})`}: ${this.detail}`
  }
}

/**
 * The one transient-error rule. Transient: the same request may succeed later, unchanged (the
 * server busy or restarting, the network down); an informer resumes its watch after one.
 */
export const isTransient = (e: KubeError): boolean => e.reason === "TooManyRequests" || e.reason === "Timeout" || e.reason === "Unavailable"

/**
 * Worth retrying the work that failed: a transient failure, a conflict (the work reads again and
 * writes again), or a failure that cannot be classified. Everything else needs a change in the
 * world first.
 */
export const isRetryableKubeError = (e: KubeError): boolean => isTransient(e) || e.reason === "Conflict" || e.reason === "Unknown"

/**
 * A transient failure without an answer: refused, reset, DNS, TLS handshake or a timeout. A status
 * (a 503 too) means the server answered, and is the caller's to report.
 */
export const isUnreachable = (e: KubeError): boolean => e.status === undefined && isTransient(e)

/** The status an API server answers with for a reason (the inverse of `reasonForStatus`), for emulations. */
export const statusForReason = (reason: KubeErrorReason): number | undefined => STATUS[reason]

const STATUS: Partial<Record<KubeErrorReason, number>> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  AlreadyExists: 409,
  Conflict: 409,
  Gone: 410,
  Invalid: 422,
  TooManyRequests: 429,
  Unavailable: 503,
  Timeout: 504
}

const REASON_OF_STATUS = new Map(Object.entries(STATUS).map(([reason, status]) => [status, reason as KubeErrorReason]))

/** HTTP status → reason, the single place this mapping lives (STATUS, read backwards). */
export const reasonForStatus = (status: number, verb: string): KubeErrorReason => {
  if (status === 409) return verb === "create" ? "AlreadyExists" : "Conflict"
  // Request too large (e.g. a JSON patch over 10,000 operations): retrying cannot help.
  if (status === 413) return "BadRequest"
  return REASON_OF_STATUS.get(status) ?? (status >= 500 ? "Unavailable" : "Unknown")
}
