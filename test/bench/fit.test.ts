import { describe, expect, it } from "vitest"
import { crossing, linearFit } from "../../bench/lib/fit.ts"

describe("linearFit", () => {
  it("recovers a line through exact points, and where it crosses a ceiling", () => {
    const fit = linearFit([[10_000, 150], [50_000, 250], [150_000, 500]])!
    expect(fit.slope).toBeCloseTo(0.0025, 10)
    expect(fit.intercept).toBeCloseTo(125, 8)
    expect(fit.r2).toBeCloseTo(1, 10)
    expect(crossing(fit, 512)).toBeCloseTo(154_800, 4)
  })

  it("fits scattered points by least squares and says how well", () => {
    const fit = linearFit([[0, 1], [1, 3], [2, 2], [3, 5]])!
    expect(fit.slope).toBeCloseTo(1.1, 10)
    expect(fit.intercept).toBeCloseTo(1.1, 10)
    expect(fit.r2).toBeCloseTo(0.6914, 3)
  })

  it("has no line below two distinct xs, and no crossing for a flat or falling one", () => {
    expect(linearFit([[1, 2]])).toBeUndefined()
    expect(linearFit([[1, 2], [1, 3]])).toBeUndefined()
    expect(crossing(linearFit([[0, 5], [1, 4]])!, 512)).toBeUndefined()
  })
})
