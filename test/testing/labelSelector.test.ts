import { describe, expect, it } from "vitest"
import { parseLabelSelector } from "../../src/testing/labelSelector.ts"

const matches = (selector: string, labels: Record<string, string>) => {
  const p = parseLabelSelector(selector)
  if (typeof p !== "function") throw new Error(`unparsable: ${p.invalid}`)
  return p(labels)
}

describe("parseLabelSelector", () => {
  it("an empty selector matches everything", () => {
    expect(matches("", {})).toBe(true)
    expect(matches("  ", { a: "b" })).toBe(true)
  })

  it("equality: = and == match the value, != also matches a missing label", () => {
    expect(matches("app=web", { app: "web" })).toBe(true)
    expect(matches("app==web", { app: "web" })).toBe(true)
    expect(matches("app=web", { app: "db" })).toBe(false)
    expect(matches("app=web", {})).toBe(false)
    expect(matches("app!=web", { app: "db" })).toBe(true)
    expect(matches("app!=web", {})).toBe(true)
    expect(matches("app!=web", { app: "web" })).toBe(false)
    expect(matches("app=", { app: "" })).toBe(true)
  })

  it("sets: in needs the label, notin also matches a missing one; commas inside parentheses do not split", () => {
    expect(matches("env in (prod, qa),tier", { env: "qa", tier: "x" })).toBe(true)
    expect(matches("env in (prod,qa)", {})).toBe(false)
    expect(matches("env notin (prod,qa)", {})).toBe(true)
    expect(matches("env notin (prod,qa)", { env: "prod" })).toBe(false)
  })

  it("existence, absence and numeric bounds; every requirement must hold", () => {
    expect(matches("tier", { tier: "" })).toBe(true)
    expect(matches("!tier", { tier: "a" })).toBe(false)
    expect(matches("example.com/tier,!gone", { "example.com/tier": "a" })).toBe(true)
    expect(matches("n>2", { n: "3" })).toBe(true)
    expect(matches("n<2", { n: "3" })).toBe(false)
    expect(matches("n>2", { n: "many" })).toBe(false)
    expect(matches("a=1,b=2", { a: "1", b: "3" })).toBe(false)
  })

  it("names the requirement it cannot read", () => {
    expect(parseLabelSelector("app in web")).toEqual({ invalid: "app in web" })
    expect(parseLabelSelector("a=1,,b=2")).toEqual({ invalid: "" })
    expect(parseLabelSelector("a=b c")).toEqual({ invalid: "a=b c" })
    expect(parseLabelSelector("env in ()")).toEqual({ invalid: "env in ()" })
  })
})
