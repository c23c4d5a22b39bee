import { describe, expect, it } from "vitest"
import { KubeError, type KubeErrorReason, isRetryableKubeError, isTransient, isUnreachable, reasonForStatus, statusForReason } from "../../src/services/KubeError.ts"

describe("KubeError status mapping", () => {
  const reasons: ReadonlyArray<KubeErrorReason> = [
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Invalid",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "Gone",
    "TooManyRequests",
    "Timeout",
    "Unavailable"
  ]
  it.each(reasons)("%s: the status an emulation answers with maps back to the same reason", (reason) => {
    const status = statusForReason(reason)
    expect(status).toBeDefined()
    expect(reasonForStatus(status!, reason === "AlreadyExists" ? "create" : "patch")).toBe(reason)
  })
  it("Unknown has no status of its own", () => {
    expect(statusForReason("Unknown")).toBeUndefined()
  })
})

describe("KubeError", () => {
  it("keeps the failure underneath as its cause, as Error does; the message stays its own", () => {
    const underneath = new Error("connect ECONNREFUSED 127.0.0.1:6443")
    const e = new KubeError({ reason: "Unavailable", verb: "get", target: "pods ns/p", detail: "ECONNREFUSED: connection refused", cause: underneath })
    expect(e.cause).toBe(underneath)
    expect(e).toBeInstanceOf(Error)
    expect(e.message).toBe("get pods ns/p: Unavailable: ECONNREFUSED: connection refused")
    expect(new KubeError({ reason: "NotFound", verb: "get", target: "pods ns/p", status: 404, detail: "not found" }).cause).toBeUndefined()
  })
})

describe("the transient-error rule", () => {
  const error = (reason: KubeErrorReason, status?: number) => new KubeError({ reason, verb: "get", target: "pods ns/p", detail: "d", ...(status === undefined ? {} : { status }) })
  it.each([
    // reason, status, transient, retryable, unreachable
    ["TooManyRequests", 429, true, true, false],
    ["Unavailable", 503, true, true, false],
    ["Unavailable", undefined, true, true, true],
    ["Timeout", 504, true, true, false],
    ["Timeout", undefined, true, true, true],
    ["Conflict", 409, false, true, false],
    ["Unknown", undefined, false, true, false],
    ["NotFound", 404, false, false, false],
    ["Forbidden", 403, false, false, false],
    ["Invalid", 422, false, false, false],
    ["Gone", 410, false, false, false]
  ] as const)("%s (HTTP %s): transient %s, retryable %s, unreachable %s", (reason, status, transient, retryable, unreachable) => {
    const e = error(reason, status)
    expect([isTransient(e), isRetryableKubeError(e), isUnreachable(e)]).toEqual([transient, retryable, unreachable])
  })
})
