import { describe, expect, it } from "vitest"
import { KubeError, type KubeErrorReason, reasonForStatus, statusForReason } from "../../src/services/KubeError.ts"

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
