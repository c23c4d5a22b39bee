import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { CONTROLLER_SERVICE_ACCOUNT, RBAC_NEEDS, type RbacNeed, describeAccess, resolveNeeds } from "../../src/domain/rbac-needs.ts"

interface Rule {
  readonly apiGroups: ReadonlyArray<string>
  readonly resources: ReadonlyArray<string>
  readonly resourceNames?: ReadonlyArray<string>
  readonly verbs: ReadonlyArray<string>
}
type Doc = { readonly kind: string; readonly metadata: { readonly name: string }; readonly rules?: ReadonlyArray<Rule>; readonly subjects?: ReadonlyArray<{ readonly name: string }> }

const deploy = (file: string): ReadonlyArray<Doc> =>
  parseAllDocuments(readFileSync(new URL(`../../deploy/${file}`, import.meta.url), "utf8")).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`)
    return d.toJS() as Doc
  })

/** A role's rules, one need per group × resource × name × verb, in the YAML's order. */
const expand = (doc: Doc, scope: RbacNeed["scope"]): ReadonlyArray<RbacNeed> =>
  (doc.rules ?? []).flatMap((r) =>
    r.apiGroups.flatMap((group) =>
      r.resources.flatMap((resource) =>
        (r.resourceNames ?? [undefined]).flatMap((name) => r.verbs.map((verb) => ({ group, resource, verb, scope, ...(name === undefined ? {} : { resourceName: name }) })))
      )
    )
  )

describe("the controller's RBAC needs", () => {
  it("are exactly deploy/clusterrole.yaml's rules (cluster-wide) and deploy/role.yaml's (in the namespace), verb by verb", () => {
    const clusterRole = deploy("clusterrole.yaml").find((d) => d.kind === "ClusterRole")!
    const role = deploy("role.yaml").find((d) => d.kind === "Role")!
    expect(RBAC_NEEDS).toEqual([...expand(clusterRole, "cluster"), ...expand(role, "namespace")])
  })

  it("name the ServiceAccount deploy/ creates and binds", () => {
    const [sa] = deploy("serviceaccount.yaml")
    expect(sa?.metadata.name).toBe(CONTROLLER_SERVICE_ACCOUNT)
    for (const file of ["clusterrole.yaml", "role.yaml"]) {
      const binding = deploy(file).find((d) => d.kind.endsWith("Binding"))!
      expect(binding.subjects?.map((s) => s.name)).toEqual([CONTROLLER_SERVICE_ACCOUNT])
    }
  })

  const ctx = { namespace: "pools", leaderElect: true, leaseNamespace: "leases", leaseName: "my-lease", scheduleConfigMap: "sched" }

  it("resolve the Role's verbs in --namespace, the Lease's in its namespace under its name, the ConfigMap under its name", () => {
    const described = resolveNeeds(ctx).map(describeAccess)
    expect(described).toContain("patch ippools in pools")
    expect(described).toContain("list pods cluster-wide")
    expect(described).toContain("create leases in leases")
    expect(described).toContain("update leases/my-lease in leases")
    expect(described).toContain("watch configmaps/sched in pools")
    expect(described).toHaveLength(RBAC_NEEDS.length)
  })

  it("need no Lease without leader election, and no ConfigMap when the schedule is not looked for there", () => {
    const described = resolveNeeds({ ...ctx, leaderElect: false, scheduleConfigMap: "" }).map(describeAccess)
    expect(described.filter((d) => / leases| configmaps/.test(d))).toEqual([])
    expect(described).toHaveLength(RBAC_NEEDS.length - 6)
  })
})
