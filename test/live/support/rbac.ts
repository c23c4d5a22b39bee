/**
 * deploy/'s RBAC as objects: read from the YAML files (as kustomize would place them: the
 * namespaced ones in kube-system), renamed and trimmed per test variant, created through the
 * admin API; a ServiceAccount token from the TokenRequest API and a kubeconfig around it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { parseAllDocuments } from "yaml"
import { kubeconfigYaml } from "../cluster.ts"
import { type Credentials, restOk } from "./rest.ts"

const DEPLOY = fileURLToPath(new URL("../../../deploy", import.meta.url))

export interface PolicyRule {
  readonly apiGroups: ReadonlyArray<string>
  readonly resources: ReadonlyArray<string>
  readonly resourceNames?: ReadonlyArray<string>
  readonly verbs: ReadonlyArray<string>
}

export type Obj = { readonly apiVersion: string; readonly kind: string; readonly metadata: { readonly name: string; readonly namespace?: string }; readonly [k: string]: unknown }

/** Every document of a deploy/ file. */
export const deployObjects = (file: string): ReadonlyArray<Obj> =>
  parseAllDocuments(fs.readFileSync(path.join(DEPLOY, file), "utf8")).flatMap((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`)
    const o = d.toJS() as Obj | null
    return o === null ? [] : [o]
  })

export interface Rbac {
  readonly serviceAccount: Obj
  readonly clusterRole: Obj & { readonly rules: ReadonlyArray<PolicyRule> }
  readonly clusterRoleBinding: Obj
  readonly role: Obj & { readonly rules: ReadonlyArray<PolicyRule> }
  readonly roleBinding: Obj
}

const one = (objects: ReadonlyArray<Obj>, kind: string): Obj => {
  const found = objects.filter((o) => o.kind === kind)
  if (found.length !== 1) throw new Error(`expected one ${kind} in deploy/, found ${found.length}`)
  return found[0]!
}

/** serviceaccount.yaml, clusterrole.yaml and role.yaml as shipped. */
export const shippedRbac = (): Rbac => {
  const all = [...deployObjects("serviceaccount.yaml"), ...deployObjects("clusterrole.yaml"), ...deployObjects("role.yaml")]
  return {
    serviceAccount: one(all, "ServiceAccount"),
    clusterRole: one(all, "ClusterRole") as Rbac["clusterRole"],
    clusterRoleBinding: one(all, "ClusterRoleBinding"),
    role: one(all, "Role") as Rbac["role"],
    roleBinding: one(all, "RoleBinding")
  }
}

/** One verb of one rule: what a least-privilege variant takes away. */
export interface RuleVerb {
  readonly kind: "ClusterRole" | "Role"
  readonly rule: number
  readonly resource: string
  readonly verb: string
  /** e.g. `Role leases[whereabouts-gc] update`. */
  readonly label: string
}

export const ruleVerbs = (rbac: Rbac): ReadonlyArray<RuleVerb> =>
  (["ClusterRole", "Role"] as const).flatMap((kind) =>
    (kind === "ClusterRole" ? rbac.clusterRole : rbac.role).rules.flatMap((r, rule) => {
      if (r.resources.length !== 1) throw new Error(`${kind} rule ${rule} names ${r.resources.length} resources; the test expects one per rule`)
      const resource = r.resources[0]!
      const names = r.resourceNames === undefined ? "" : `[${r.resourceNames.join(",")}]`
      return r.verbs.map((verb) => ({ kind, rule, resource, verb, label: `${kind} ${resource}${names} ${verb}` }))
    })
  )

const without = (rules: ReadonlyArray<PolicyRule>, index: number, verb: string): ReadonlyArray<PolicyRule> =>
  rules.flatMap((r, i) => {
    if (i !== index) return [r]
    const verbs = r.verbs.filter((v) => v !== verb)
    return verbs.length === 0 ? [] : [{ ...r, verbs }]
  })

export interface Installation {
  readonly serviceAccount: string
  readonly saNamespace: string
  /** Where the Role (pools, reservations, Lease) is bound. */
  readonly namespace: string
  readonly objects: ReadonlyArray<Obj>
}

/**
 * The shipped objects, with the namespaced ones in `namespace` (kube-system as shipped), and
 * optionally renamed (`name`, for side-by-side variants) and with one rule-verb removed.
 */
export const installation = (rbac: Rbac, options: { readonly namespace: string; readonly name?: string; readonly remove?: RuleVerb }): Installation => {
  const name = options.name ?? rbac.serviceAccount.metadata.name
  const saNamespace = "kube-system"
  const meta = (o: Obj, namespace?: string) => ({ ...o.metadata, name, ...(namespace === undefined ? {} : { namespace }) })
  const subjects = [{ kind: "ServiceAccount", name, namespace: saNamespace }]
  const rm = options.remove
  const clusterRules = rm?.kind === "ClusterRole" ? without(rbac.clusterRole.rules, rm.rule, rm.verb) : rbac.clusterRole.rules
  const roleRules = rm?.kind === "Role" ? without(rbac.role.rules, rm.rule, rm.verb) : rbac.role.rules
  const objects: Array<Obj> = [
    { ...rbac.serviceAccount, metadata: meta(rbac.serviceAccount, saNamespace) },
    { ...rbac.clusterRole, metadata: meta(rbac.clusterRole), rules: clusterRules },
    { ...rbac.clusterRoleBinding, metadata: meta(rbac.clusterRoleBinding), roleRef: { ...(rbac.clusterRoleBinding["roleRef"] as object), name }, subjects },
    { ...rbac.role, metadata: meta(rbac.role, options.namespace), rules: roleRules },
    { ...rbac.roleBinding, metadata: meta(rbac.roleBinding, options.namespace), roleRef: { ...(rbac.roleBinding["roleRef"] as object), name }, subjects }
  ]
  return { serviceAccount: name, saNamespace, namespace: options.namespace, objects }
}

const plural: Record<string, string> = {
  ServiceAccount: "serviceaccounts",
  ClusterRole: "clusterroles",
  ClusterRoleBinding: "clusterrolebindings",
  Role: "roles",
  RoleBinding: "rolebindings"
}

/** REST path of an object (or of its collection). */
export const objectPath = (o: Obj, withName = true): string => {
  const group = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`
  const ns = o.metadata.namespace === undefined ? "" : `/namespaces/${o.metadata.namespace}`
  const p = plural[o.kind]
  if (p === undefined) throw new Error(`no plural for ${o.kind}`)
  return `${group}${ns}/${p}${withName ? `/${o.metadata.name}` : ""}`
}

/** Creates each object, or replaces it when it exists (the test owns these names). */
export const applyObjects = (admin: Credentials, objects: ReadonlyArray<Obj>) =>
  Effect.forEach(
    objects,
    (o) =>
      Effect.gen(function* () {
        const created = yield* restOk(admin, "POST", objectPath(o, false), o, [201, 409])
        if (created["kind"] === "Status") {
          const current = yield* restOk(admin, "GET", objectPath(o), undefined, [200])
          const resourceVersion = (current["metadata"] as { resourceVersion: string }).resourceVersion
          yield* restOk(admin, "PUT", objectPath(o), { ...o, metadata: { ...o.metadata, resourceVersion } }, [200])
        }
      }),
    { discard: true }
  )

export const deleteObjects = (admin: Credentials, objects: ReadonlyArray<Obj>) =>
  Effect.forEach(objects, (o) => restOk(admin, "DELETE", objectPath(o), undefined, [200, 202, 404]), { discard: true })

/** A token of the ServiceAccount (TokenRequest API, as `kubectl create token`), valid for `expirationSeconds`. */
export const serviceAccountToken = (admin: Credentials, namespace: string, name: string, expirationSeconds = 3600) =>
  Effect.map(
    restOk(admin, "POST", `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds }
    }),
    (res) => {
      const token = (res["status"] as { token?: string } | undefined)?.token
      if (token === undefined || token === "") throw new Error(`TokenRequest for ${namespace}/${name} returned no token`)
      return token
    }
  )

/** A kubeconfig file authenticating with `token` at the admin's server (same CA). */
export const writeTokenKubeconfig = (file: string, admin: Credentials, user: string, token: string): string => {
  const text = kubeconfigYaml(admin.server, admin.caPem, token, user)
  fs.writeFileSync(file, text, { mode: 0o600 })
  return file
}
