/**
 * The README's claims that files elsewhere decide: its RBAC table is deploy/'s rules, its
 * resources are deploy/'s Deployment's, its length stays a newcomer's read, and every page it
 * links exists and every page of docs/ is linked.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { tableRows } from "../support/markdown.ts"
import { ROOT } from "./support/tools.ts"

const README = readFileSync(join(ROOT, "README.md"), "utf8")

type Rule = { readonly apiGroups: ReadonlyArray<string>; readonly resources: ReadonlyArray<string>; readonly resourceNames?: ReadonlyArray<string>; readonly verbs: ReadonlyArray<string> }

const rulesOf = (file: string): ReadonlyArray<Rule> =>
  parseAllDocuments(readFileSync(join(ROOT, "deploy", file), "utf8"))
    .map((d) => d.toJSON() as { kind?: string; rules?: ReadonlyArray<Rule> })
    .flatMap((o) => (o.kind === "ClusterRole" || o.kind === "Role" ? (o.rules ?? []) : []))

/** The rows of the README's table whose header starts with `header`. */
const table = (header: string): ReadonlyArray<ReadonlyArray<string>> => {
  const rows = tableRows(README, header)
  expect(rows.length, `README has a table "${header}"`).toBeGreaterThan(0)
  return rows
}

describe("README", () => {
  it("its RBAC table grants exactly what deploy/'s ClusterRole and Role grant, resource by resource", () => {
    const granted = new Map<string, Set<string>>()
    const add = (resource: string, verbs: ReadonlyArray<string>) => {
      const set = granted.get(resource) ?? new Set<string>()
      verbs.forEach((v) => set.add(v))
      granted.set(resource, set)
    }
    for (const r of [...rulesOf("clusterrole.yaml"), ...rulesOf("role.yaml")]) for (const res of r.resources) add(res, r.verbs)
    const documented = new Map<string, Set<string>>()
    for (const [, resources, verbs] of table("scope")) {
      for (const name of resources!.split(",").map((s) => s.trim().replace(/ \(?.*$/, "").replace(/^configmap$/, "configmaps"))) {
        const set = documented.get(name) ?? new Set<string>()
        verbs!.split(/[,;]/).map((v) => v.trim()).forEach((v) => set.add(v))
        documented.set(name, set)
      }
    }
    const sorted = (m: Map<string, Set<string>>) => Object.fromEntries([...m].map(([k, v]) => [k, [...v].sort()]).sort())
    expect(sorted(documented)).toEqual(sorted(granted))
  })

  it("states the shipped Deployment's replicas, requests and limit", () => {
    const deployment = parseAllDocuments(readFileSync(join(ROOT, "deploy/deployment.yaml"), "utf8"))[0]!.toJSON() as {
      spec: { replicas: number; template: { spec: { containers: ReadonlyArray<{ resources: { requests: Record<string, string>; limits: Record<string, string> } }> } } }
    }
    const { requests, limits } = deployment.spec.template.spec.containers[0]!.resources
    expect(README).toContain(`The shipped Deployment runs ${deployment.spec.replicas} replicas`)
    expect(requests).toEqual({ cpu: "50m", memory: "256Mi" })
    expect(limits).toEqual({ memory: "512Mi" })
    expect(README).toContain("requesting 50m CPU and 256 MiB and\nlimited to 512 MiB of memory (no CPU limit)")
  })

  it("stays a newcomer's read (at most ~250 lines), links only pages that exist, and links every page of docs/", () => {
    expect(README.split("\n").length).toBeLessThanOrEqual(250)
    const links = [...README.matchAll(/\]\(([^)#]+)(#[^)]*)?\)/g)].map((m) => m[1]!).filter((l) => !l.startsWith("http"))
    for (const l of links) expect(existsSync(join(ROOT, l)), l).toBe(true)
    for (const page of readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md"))) expect(links, page).toContain(`docs/${page}`)
  })
})
