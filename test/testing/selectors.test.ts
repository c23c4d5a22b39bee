import { describe, expect, it } from "vitest"
import { parseFieldSelector, parseLabelSelector } from "../../src/testing/selectors.ts"

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

describe("parseFieldSelector", () => {
  const pod = { metadata: { name: "p", namespace: "ns" }, spec: { nodeName: "n1" }, status: { phase: "Running" } }
  const matches = (kind: string, selector: string, o: Record<string, unknown>) => {
    const p = parseFieldSelector(kind, selector)
    if (typeof p !== "function") throw new Error(`unparsable: ${p.invalid}`)
    return p(o)
  }

  it("name and namespace for every kind; node and phase for pods; = == != joined by commas", () => {
    expect(matches("IPPool", "metadata.name=p", pod)).toBe(true)
    expect(matches("IPPool", "metadata.name==q", pod)).toBe(false)
    expect(matches("Pod", "spec.nodeName=n1,status.phase!=Succeeded", pod)).toBe(true)
    expect(matches("Pod", "metadata.namespace=ns,spec.nodeName!=n1", pod)).toBe(false)
    expect(matches("Pod", "spec.nodeName=", { metadata: { name: "unscheduled" } })).toBe(true)
    expect(matches("Pod", "", pod)).toBe(true)
  })

  it("refuses a field the kind does not offer instead of selecting everything", () => {
    expect(parseFieldSelector("IPPool", "spec.nodeName=n1")).toEqual({ invalid: "spec.nodeName=n1" })
    expect(parseFieldSelector("Pod", "spec.restartPolicy=Always")).toEqual({ invalid: "spec.restartPolicy=Always" })
    expect(parseFieldSelector("Pod", "metadata.name")).toEqual({ invalid: "metadata.name" })
  })
})
