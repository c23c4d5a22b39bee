/**
 * The API access the controller needs, verb by verb: exactly what deploy/clusterrole.yaml and
 * deploy/role.yaml grant (test/domain/rbac-needs.test.ts keeps them equal). A constant, not the
 * YAML read at run time, because `preflight` runs from the image, which holds no deploy/.
 */

export interface RbacNeed {
  /** "" for the core group. */
  readonly group: string
  readonly resource: string
  readonly verb: string
  /** "cluster": the ClusterRole's, in every namespace; "namespace": the Role's, in the namespace the controller is installed to. */
  readonly scope: "cluster" | "namespace"
  /** As shipped; the Lease's and the schedule ConfigMap's follow their options at run time (resolveNeeds). */
  readonly resourceName?: string
}

const rule = (scope: RbacNeed["scope"], group: string, resource: string, verbs: ReadonlyArray<string>, resourceName?: string): ReadonlyArray<RbacNeed> =>
  verbs.map((verb) => ({ group, resource, verb, scope, ...(resourceName === undefined ? {} : { resourceName }) }))

/** In the order of the YAML's rules and verbs. */
export const RBAC_NEEDS: ReadonlyArray<RbacNeed> = [
  ...rule("cluster", "", "pods", ["get", "list", "watch"]),
  ...rule("cluster", "", "nodes", ["get", "list", "watch"]),
  ...rule("cluster", "k8s.cni.cncf.io", "network-attachment-definitions", ["list", "watch"]),
  ...rule("cluster", "", "events", ["create", "patch"]),
  ...rule("namespace", "whereabouts.cni.cncf.io", "ippools", ["get", "list", "watch", "patch", "delete"]),
  ...rule("namespace", "whereabouts.cni.cncf.io", "nodeslicepools", ["get", "list", "watch"]),
  ...rule("namespace", "", "configmaps", ["get", "list", "watch"], "whereabouts-config"),
  ...rule("namespace", "whereabouts.cni.cncf.io", "overlappingrangeipreservations", ["get", "list", "watch", "delete", "create"]),
  ...rule("namespace", "coordination.k8s.io", "leases", ["create"]),
  ...rule("namespace", "coordination.k8s.io", "leases", ["get", "update"], "whereabouts-gc")
]

/** One access to ask the API server about (a SubjectAccessReview's resourceAttributes). */
export interface AccessCheck {
  readonly group: string
  readonly resource: string
  readonly verb: string
  /** Undefined: cluster-wide. */
  readonly namespace?: string
  readonly name?: string
}

/** The options that decide where the controller's namespaced access is needed and under which names. */
interface NeedContext {
  /** The pools' namespace (--namespace), where the Role is bound. */
  readonly namespace: string
  readonly leaderElect: boolean
  readonly leaseNamespace: string
  readonly leaseName: string
  /** "" when the controller does not look for a schedule ConfigMap. */
  readonly scheduleConfigMap: string
}

const isLease = (n: RbacNeed) => n.group === "coordination.k8s.io" && n.resource === "leases"

/**
 * RBAC_NEEDS as the configured controller needs them: the Lease in its namespace under its name
 * (none without leader election), the schedule ConfigMap under its name (none when not looked for).
 */
export const resolveNeeds = (ctx: NeedContext): ReadonlyArray<AccessCheck> =>
  RBAC_NEEDS.flatMap((n): ReadonlyArray<AccessCheck> => {
    if (isLease(n) && !ctx.leaderElect) return []
    if (n.resource === "configmaps" && ctx.scheduleConfigMap === "") return []
    const base = { group: n.group, resource: n.resource, verb: n.verb }
    const namespace = n.scope === "cluster" ? {} : { namespace: isLease(n) ? ctx.leaseNamespace : ctx.namespace }
    if (n.resourceName === undefined) return [{ ...base, ...namespace }]
    const name = isLease(n) ? ctx.leaseName : n.resource === "configmaps" ? ctx.scheduleConfigMap : n.resourceName
    return [{ ...base, ...namespace, name }]
  })

/** "patch ippools in kube-system", "get leases/whereabouts-gc in kube-system", "list pods cluster-wide". */
export const describeAccess = (a: AccessCheck): string =>
  `${a.verb} ${a.resource}${a.name === undefined ? "" : `/${a.name}`}${a.namespace === undefined ? " cluster-wide" : ` in ${a.namespace}`}`

/** The ServiceAccount deploy/ runs the controller as, in the namespace it is installed to (the chart's is its full name). */
export const CONTROLLER_SERVICE_ACCOUNT = "whereabouts-gc"
