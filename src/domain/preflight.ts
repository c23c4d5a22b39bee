/**
 * preflight's verdicts as rows of CHECK, RESULT and DETAIL. A failure stops the controller from
 * working (a CRD it reads is missing, a verb it needs not granted); a warning is worth knowing
 * before installing but need not be fixed first.
 */
import type { BadInput } from "./bad-input.ts"
import { isRecord, list } from "./json.ts"

export type Verdict = "ok" | "warn" | "fail"

export interface CheckRow {
  readonly check: string
  readonly result: Verdict
  readonly detail: string
}

const INSTALL_WHEREABOUTS = "install whereabouts first, or apply deploy/components/whereabouts-crds on a test cluster"

/** The CRDs the controller reads: what their absence means (fail: it cannot work without one), and why one may be missing or what to do. */
export const CRD_SPECS = {
  ippools: { name: "ippools.whereabouts.cni.cncf.io", whenMissing: "fail", hint: INSTALL_WHEREABOUTS },
  reservations: { name: "overlappingrangeipreservations.whereabouts.cni.cncf.io", whenMissing: "fail", hint: INSTALL_WHEREABOUTS },
  nodeSlicePools: { name: "nodeslicepools.whereabouts.cni.cncf.io", whenMissing: "warn", hint: "whereabouts before 0.8 has no node slices; the controller runs without it" },
  nads: {
    name: "network-attachment-definitions.k8s.cni.cncf.io",
    whenMissing: "warn",
    hint: "no Multus: the controller finds no pod's secondary networks, and audit and this check read no NADs"
  }
} as const satisfies Record<string, { readonly name: string; readonly whenMissing: Verdict; readonly hint: string }>

export type CrdSpec = (typeof CRD_SPECS)[keyof typeof CRD_SPECS]

/** What a list with limit=1 of the CRD's resource answered. */
export type CrdProbe = { readonly _tag: "Served" } | { readonly _tag: "Missing" } | { readonly _tag: "Failed"; readonly error: string }

/** A required CRD that is not served fails; an optional one warns. */
export const crdRow = (spec: CrdSpec, probe: CrdProbe): CheckRow => {
  const check = `CRD ${spec.name}`
  switch (probe._tag) {
    case "Served":
      return { check, result: "ok", detail: "installed and served" }
    case "Missing":
      return { check, result: spec.whenMissing, detail: `not installed: ${spec.hint}` }
    case "Failed":
      return { check, result: spec.whenMissing, detail: `not served: ${probe.error}` }
  }
}

/** Whose access the RBAC check asked about, and how. */
export interface RbacSubject {
  /** e.g. "ServiceAccount kube-system/whereabouts-gc", "the caller (admin)". */
  readonly who: string
  /** Why the caller was checked instead of a ServiceAccount, when it was. */
  readonly note?: string | undefined
}

export type RbacProbe =
  | { readonly _tag: "Reviewed"; readonly subject: RbacSubject; readonly checked: number; readonly denied: ReadonlyArray<string> }
  | { readonly _tag: "Failed"; readonly subject: RbacSubject; readonly error: string }

export const rbacRow = (probe: RbacProbe): CheckRow => {
  const who = `${probe.subject.who}${probe.subject.note === undefined ? "" : ` (${probe.subject.note})`}`
  if (probe._tag === "Failed") return { check: "RBAC", result: "fail", detail: `could not review the access of ${who}: ${probe.error}` }
  if (probe.denied.length > 0) return { check: "RBAC", result: "fail", detail: `missing: ${probe.denied.join(", ")}; for ${who}` }
  return { check: "RBAC", result: "ok", detail: `all ${probe.checked} verbs the controller needs are allowed for ${who}` }
}

/** An upstream workload that frees addresses on its own. */
export interface UpstreamWorkload {
  readonly kind: "DaemonSet" | "Deployment"
  readonly namespace: string
  readonly name: string
  readonly program: "ip-control-loop" | "ip-reconciler"
  /** Deployments only: spec.replicas (1 when unset). */
  readonly replicas?: number
}

export const UPSTREAM_RUNNING = "upstream's reconciler is running: safe side by side (every write is guarded), but turn it off after installing — see docs/migration.md"

/**
 * Labels upstream's manifests (doc/crds) and its chart (whereabouts-chart) put on the DaemonSet
 * and the reconciler Deployment; the command line is what confirms one.
 */
export const UPSTREAM_APP_LABELS: ReadonlyArray<string> = ["whereabouts", "whereabouts-reconciler", "whereabouts-chart"]

const PROGRAMS: ReadonlyArray<UpstreamWorkload["program"]> = ["ip-control-loop", "ip-reconciler"]

/**
 * The upstream freeing program a workload runs, if any: `/ip-control-loop` inside the DaemonSet's
 * shell script (`/bin/sh -c "... /ip-control-loop -log-level debug"`), or `/ip-reconciler` as the
 * reconciler Deployment's command; a word of the command line, so a comment or a path that merely
 * contains the name does not count.
 */
export const upstreamProgram = (containers: unknown): UpstreamWorkload["program"] | undefined => {
  const field = (c: unknown, key: string) => (isRecord(c) ? list(c[key]) : [])
  const words = list(containers)
    .flatMap((c) => [...field(c, "command"), ...field(c, "args")])
    .flatMap((w) => (typeof w === "string" ? w.split(/\s+/) : []))
  return PROGRAMS.find((p) => words.some((w) => w === p || w.endsWith(`/${p}`)))
}

/** One row per program: warn for each workload that runs it, ok when none does (or a Deployment is scaled to 0). */
export const upstreamRows = (found: ReadonlyArray<UpstreamWorkload> | { readonly error: string }): ReadonlyArray<CheckRow> =>
  PROGRAMS.flatMap((program): ReadonlyArray<CheckRow> => {
    const check = `upstream ${program}`
    if ("error" in found) return [{ check, result: "warn", detail: `could not look for it: ${found.error}` }]
    const workloads = found.filter((w) => w.program === program)
    if (workloads.length === 0) return [{ check, result: "ok", detail: `not found (no DaemonSet or Deployment labelled app=${UPSTREAM_APP_LABELS.join("|")} runs it)` }]
    return workloads.map((w): CheckRow => {
      const what = `${w.kind} ${w.namespace}/${w.name}`
      return w.replicas === 0 ? { check, result: "ok", detail: `${what} is scaled to 0` } : { check, result: "warn", detail: `${what}: ${UPSTREAM_RUNNING}` }
    })
  })

/** A NAD whose config could not be read, and why: as audit lists it. */
export type NadIssue = BadInput["nads"][number]

export const nadRows = (read: { readonly whereabouts: number; readonly other: number; readonly issues: ReadonlyArray<NadIssue> }): ReadonlyArray<CheckRow> =>
  read.issues.length === 0
    ? [{ check: "NAD configs", result: "ok", detail: `${read.whereabouts} with whereabouts IPAM read (${read.other} with another IPAM, none, or a config on the nodes' disks left alone)` }]
    : read.issues.map((i) => ({ check: `NAD ${i.namespace}/${i.name}`, result: "warn", detail: `cannot read its IPAM config: ${i.why}` }))

/** 1 when any check failed, else 0: warnings are listed for the operator but do not stop an install. */
export const exitCodeOf = (rows: ReadonlyArray<CheckRow>): 0 | 1 => (rows.some((r) => r.result === "fail") ? 1 : 0)

export const countVerdicts = (rows: ReadonlyArray<CheckRow>): Record<Verdict, number> => {
  const count = (v: Verdict) => rows.filter((r) => r.result === v).length
  return { ok: count("ok"), warn: count("warn"), fail: count("fail") }
}
