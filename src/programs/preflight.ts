/**
 * `preflight`: read-only checks before installing, with the operator's kubeconfig: the CRDs, the
 * controller's RBAC, upstream's freeing components, unreadable NADs, full pools. It writes only access
 * reviews, which the API server does not store.
 */
import { Effect } from "effect"
import { atOrOver } from "../domain/capacity.ts"
import { type CheckRow, CRD_SPECS, type CrdProbe, type CrdSpec, type RbacProbe, type RbacSubject, type UpstreamWorkload, UPSTREAM_APP_LABELS, countVerdicts, crdRow, exitCodeOf, nadRows, rbacRow, upstreamProgram, upstreamRows } from "../domain/preflight.ts"
import type { OutputFormat } from "../domain/option-values.ts"
import { badInputOf } from "../domain/bad-input.ts"
import { type AccessCheck, CONTROLLER_SERVICE_ACCOUNT, describeAccess, resolveNeeds } from "../domain/rbac-needs.ts"
import type { NamespacedName } from "../domain/pod.ts"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { KubeApi, listAll } from "../services/KubeApi.ts"
import type { KubeError, KubeErrorReason } from "../services/KubeError.ts"
import { NadConfigs } from "../services/NadConfigs.ts"
import * as R from "../services/resources.ts"
import { plural, table } from "./audit.ts"
import { poolNearlyFullMessage } from "./pool-usage.ts"
import { type PoolReport, listWhereabouts, poolReports } from "./sweep.ts"

// What only preflight reads: not in resources.ts, which lists what the controller touches (and its RBAC grants).
const DaemonSets: R.Resource = { group: "apps", version: "v1", plural: "daemonsets", kind: "DaemonSet", namespaced: true }
const Deployments: R.Resource = { group: "apps", version: "v1", plural: "deployments", kind: "Deployment", namespaced: true }
const ServiceAccounts: R.Resource = { group: "", version: "v1", plural: "serviceaccounts", kind: "ServiceAccount", namespaced: true }
const review = (kind: string): R.Resource => ({ group: "authorization.k8s.io", version: "v1", plural: `${kind.toLowerCase()}s`, kind, namespaced: false })
const SelfSubjectReviews: R.Resource = { group: "authentication.k8s.io", version: "v1", plural: "selfsubjectreviews", kind: "SelfSubjectReview", namespaced: false }

/** Failures after which no check can say anything: nothing answered, or not as anyone. Exit code 3. */
const COULD_NOT_COMPLETE: ReadonlySet<KubeErrorReason> = new Set(["Unavailable", "Timeout", "Unauthorized", "TooManyRequests", "Unknown"])

/** A check's KubeErrors become its finding, except those that end the whole command. */
const explained =
  <B>(onError: (e: KubeError) => B) =>
  <A, R>(effect: Effect.Effect<A, KubeError, R>): Effect.Effect<A | B, KubeError, R> =>
    Effect.catchIf(effect, (e) => !COULD_NOT_COMPLETE.has(e.reason), (e) => Effect.succeed(onError(e)))

const CRDS: ReadonlyArray<{ readonly spec: CrdSpec; readonly resource: R.Resource; readonly inNamespace: boolean }> = [
  { spec: CRD_SPECS.ippools, resource: R.IPPools, inNamespace: true },
  { spec: CRD_SPECS.reservations, resource: R.OverlappingRangeIPReservations, inNamespace: true },
  { spec: CRD_SPECS.nodeSlicePools, resource: R.NodeSlicePools, inNamespace: true },
  { spec: CRD_SPECS.nads, resource: R.NetworkAttachmentDefinitions, inNamespace: false }
]

/** Served: a list with limit=1 answers (a 404 on the collection: not installed). */
const probeCrd = (resource: R.Resource, namespace: string | undefined) =>
  Effect.flatMap(KubeApi, (api) => api.list(resource, namespace, { limit: 1, metadataOnly: true })).pipe(
    Effect.as<CrdProbe>({ _tag: "Served" }),
    explained((e): CrdProbe => (e.reason === "NotFound" ? { _tag: "Missing" } : { _tag: "Failed", error: e.message }))
  )

interface Reviewer {
  readonly subject: RbacSubject
  /** The user and groups a SubjectAccessReview asks about; undefined: a SelfSubjectAccessReview. */
  readonly as?: { readonly user: string; readonly groups: ReadonlyArray<string> } | undefined
}

const allowed = (reviewer: Reviewer, a: AccessCheck) =>
  Effect.flatMap(KubeApi, (api) =>
    api.create(review(reviewer.as === undefined ? "SelfSubjectAccessReview" : "SubjectAccessReview"), undefined, {
      metadata: { name: "" },
      spec: {
        resourceAttributes: { group: a.group, resource: a.resource, verb: a.verb, ...(a.namespace === undefined ? {} : { namespace: a.namespace }), ...(a.name === undefined ? {} : { name: a.name }) },
        ...(reviewer.as === undefined ? {} : { user: reviewer.as.user, groups: reviewer.as.groups })
      }
    })
  ).pipe(Effect.map((o) => (o["status"] as { allowed?: unknown } | undefined)?.allowed === true))

const reviewAll = (reviewer: Reviewer, checks: ReadonlyArray<AccessCheck>) =>
  Effect.map(Effect.filter(checks, (a) => allowed(reviewer, a), { concurrency: 8, negate: true }), (denied) => denied.map(describeAccess))

/** The caller's user name (SelfSubjectReview, Kubernetes 1.28+), when the server says. */
const callerName = Effect.flatMap(KubeApi, (api) => api.create(SelfSubjectReviews, undefined, { metadata: { name: "" } })).pipe(
  Effect.map((o) => (o["status"] as { userInfo?: { username?: unknown } } | undefined)?.userInfo?.username),
  Effect.map((u) => (typeof u === "string" && u !== "" ? u : undefined)),
  explained(() => undefined)
)

const serviceAccountExists = (sa: NamespacedName) =>
  Effect.flatMap(KubeApi, (api) => api.get(ServiceAccounts, sa.namespace, sa.name, { metadataOnly: true })).pipe(
    Effect.as<boolean | undefined>(true),
    explained((e) => (e.reason === "NotFound" ? false : undefined))
  )

/**
 * Whose access to review: the ServiceAccount named, else the controller's own when it exists in
 * --namespace, else the caller (not installed yet, or run inside the controller's pod).
 */
const chooseReviewer = (named: NamespacedName | undefined, namespace: string) =>
  Effect.gen(function* () {
    const caller = yield* callerName
    const self: Reviewer = { subject: { who: caller === undefined ? "the caller" : `the caller (${caller})` } }
    const sa = named ?? { namespace, name: CONTROLLER_SERVICE_ACCOUNT }
    const exists = yield* serviceAccountExists(sa)
    const user = `system:serviceaccount:${sa.namespace}:${sa.name}`
    if (named === undefined && exists !== true) {
      const why = exists === false ? `no ServiceAccount ${sa.namespace}/${sa.name}` : `cannot read ServiceAccount ${sa.namespace}/${sa.name}`
      return { reviewer: { subject: { ...self.subject, note: `${why}: the caller's own access` } }, self }
    }
    if (caller === user) return { reviewer: self, self }
    const who = `ServiceAccount ${sa.namespace}/${sa.name}`
    const groups = ["system:serviceaccounts", `system:serviceaccounts:${sa.namespace}`, "system:authenticated"]
    const reviewer: Reviewer = { subject: { who, ...(exists === false ? { note: "it does not exist yet" } : {}) }, as: { user, groups } }
    return { reviewer, self }
  })

const rbacCheck = (named: NamespacedName | undefined) =>
  Effect.gen(function* () {
    const config = yield* ControllerConfig
    const checks = resolveNeeds(config)
    const { reviewer, self } = yield* chooseReviewer(named, config.namespace)
    const reviewed = (r: Reviewer) => Effect.map(reviewAll(r, checks), (denied): RbacProbe => ({ _tag: "Reviewed", subject: r.subject, checked: checks.length, denied }))
    // Reviewing another identity takes create on subjectaccessreviews; without it, the caller's own access is what can be told.
    const fallback = reviewed({ subject: { ...self.subject, note: `cannot review ${reviewer.subject.who}: forbidden to create subjectaccessreviews` } })
    const probe = yield* reviewed(reviewer).pipe(
      Effect.catchIf((e) => reviewer.as !== undefined && e.reason === "Forbidden", () => fallback),
      explained((e): RbacProbe => ({ _tag: "Failed", subject: reviewer.subject, error: e.message }))
    )
    return rbacRow(probe)
  })

/** DaemonSets and Deployments with upstream's labels, in every namespace, that run one of its freeing programs. */
const upstreamWorkloads = Effect.gen(function* () {
  const labelSelector = `app in (${UPSTREAM_APP_LABELS.join(",")})`
  const found: Array<UpstreamWorkload> = []
  for (const [kind, resource] of [["DaemonSet", DaemonSets], ["Deployment", Deployments]] as const) {
    const { items } = yield* listAll(resource, undefined, { labelSelector })
    for (const o of items) {
      const spec = (o["spec"] ?? {}) as { replicas?: unknown; template?: { spec?: { containers?: unknown } } }
      const program = upstreamProgram(spec.template?.spec?.containers)
      if (program === undefined) continue
      const replicas = kind === "Deployment" ? (typeof spec.replicas === "number" ? spec.replicas : 1) : undefined
      found.push({ kind, namespace: o.metadata.namespace ?? "", name: o.metadata.name, program, ...(replicas === undefined ? {} : { replicas }) })
    }
  }
  return found
}).pipe(explained((e) => ({ error: e.message })))

/** One warning per pool at or over the threshold (as the controller's PoolNearlyFull Event), else one ok row. */
export const poolRows = (pools: ReadonlyArray<Pick<PoolReport, "name" | "size" | "free">>, threshold: number): ReadonlyArray<CheckRow> => {
  const over = pools.filter((p) => atOrOver(p, threshold))
  if (over.length === 0) return [{ check: "pool usage", result: "ok", detail: `${plural(pools.length, "pool")}, none at or over the ${Math.round(threshold * 100)}% threshold` }]
  return over.map((p) => ({ check: `pool ${p.name}`, result: "warn", detail: poolNearlyFullMessage(p.name, p.size - p.free, p.size, threshold) }))
}

const notChecked = (why: string): ReadonlyArray<CheckRow> => [
  { check: "NAD configs", result: "warn", detail: `not checked: ${why}` },
  { check: "pool usage", result: "warn", detail: `not checked: ${why}` }
]

/** NADs whose config cannot be read, and pool usage with the sweep's capacity (audit's SIZE and FREE). */
const dataRows = Effect.gen(function* () {
  const { poolUsageThreshold } = yield* ControllerConfig
  const decoder = yield* NadConfigs
  const listed = yield* listWhereabouts
  const decoded = listed.nads.map((n) => ({ ...n, config: decoder.decode(n) }))
  // The NADs audit lists as bad input (a NAD with no IPAM, or its config on the nodes' disks, is not ours).
  const issues = badInputOf(decoded, [], []).nads
  const whereabouts = decoded.filter((n) => n.config._tag === "Right" && n.config.right._tag === "Whereabouts").length
  // No orphans counted: preflight lists no pods.
  const pools = poolReports(listed, [])
  return [...nadRows({ whereabouts, other: listed.nads.length - whereabouts - issues.length, issues }), ...poolRows(pools, poolUsageThreshold)]
}).pipe(explained((e) => notChecked(e.message)))


/** The rows as a table with a summary line, or as one JSON document. */
export const renderPreflight = (rows: ReadonlyArray<CheckRow>, output: OutputFormat): string => {
  const counts = countVerdicts(rows)
  if (output === "json") return JSON.stringify({ checks: rows, summary: counts }, null, 2)
  const verdict = counts.fail > 0 ? "not ready: fix the failures first" : counts.warn > 0 ? "ready; read the warnings" : "ready"
  return [table(["CHECK", "RESULT", "DETAIL"], rows.map((r) => [r.check, r.result, r.detail])), "", `${counts.ok} ok, ${plural(counts.warn, "warning")}, ${plural(counts.fail, "failure")}: ${verdict}.`].join("\n")
}

/** Runs every check, in the table's order; fails only when it could not complete (the command's exit code 3, as every one-shot's). */
export const preflight = (output: OutputFormat, serviceAccount: NamespacedName | undefined) =>
  Effect.gen(function* () {
    const { namespace } = yield* ControllerConfig
    const probes = yield* Effect.forEach(CRDS, (c) => Effect.map(probeCrd(c.resource, c.inNamespace ? namespace : undefined), (probe) => ({ ...c, probe })))
    const unserved = probes.filter((p) => p.spec !== CRD_SPECS.nodeSlicePools && p.probe._tag !== "Served").map((p) => p.spec.name)
    const data = unserved.length === 0 ? yield* dataRows : notChecked(`${unserved.join(" and ")} not served`)
    const rows = [...probes.map((p) => crdRow(p.spec, p.probe)), yield* rbacCheck(serviceAccount), ...(yield* Effect.map(upstreamWorkloads, upstreamRows)), ...data]
    return { text: renderPreflight(rows, output), exitCode: exitCodeOf(rows) as number }
  })
