import { describe, expect, it } from "vitest"
import { type KubeErrorReason, reasonForStatus, statusForReason } from "../../src/services/KubeError.ts"

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
