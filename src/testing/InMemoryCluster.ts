/**
 * An in-process Kubernetes API server emulation behind `KubeApi`: objects with
 * resourceVersions, 404/409/422 semantics, JSON and merge patches, paginated lists,
 * watches with a bounded history (410 when compacted), graceful pod deletion, a call log
 * and fault injection. Every in-memory layer shares one of these, so a test changes the
 * world in one place and every service sees it.
 */
import { randomUUID } from "node:crypto"
import { Context, Duration, Effect, Layer, Stream } from "effect"
import fastJsonPatch from "fast-json-patch"
import { KubeApi, type KubeApiShape, type KubeObject, type ListOptions, type Patch, type ReadOptions, type WatchEvent, nameOnly, objectKey, partialObjectMetadata } from "../services/KubeApi.ts"
import { KubeError, type KubeErrorReason, statusForReason } from "../services/KubeError.ts"
import { type Resource, apiVersionOf } from "../services/resources.ts"
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts"

export type Verb = "get" | "list" | "create" | "replace" | "patch" | "delete" | "watch"

export interface ApiCall {
  readonly verb: Verb
  readonly resource: string
  readonly namespace: string | undefined
  readonly name: string | undefined
}

export interface Fault {
  readonly verb?: Verb | ReadonlyArray<Verb>
  readonly resource?: string
  /** How many matching calls fail (default 1). */
  readonly times?: number
  /** Fail with this reason (default "Unavailable"), or "stall": hang (a watch stays open but deaf until closeWatches). */
  readonly reason?: KubeErrorReason | "stall"
}

export interface MemoryClusterOptions {
  /** Watch events kept per resource; older versions answer 410 Gone. */
  readonly historyLimit?: number
  /** Latency added to every call (under TestClock, advance the clock). */
  readonly latency?: Duration.DurationInput
  /** A stalled request fails with Timeout after this long, as KubeApiLive's (default 30 s). */
  readonly requestTimeout?: Duration.DurationInput
  readonly now?: () => Date
}

interface Watcher {
  readonly plural: string
  readonly namespace: string | undefined
  readonly selects: (o: KubeObject) => boolean
  readonly emit: (e: WatchEvent) => void
  readonly end: () => void
}

/** A change as history keeps it: the object after it and, for a watch's selector, before it (a deletion's is the object deleted). */
interface Change {
  readonly type: "ADDED" | "MODIFIED" | "DELETED"
  readonly object: Stored
  readonly prev: Stored | undefined
}

type Stored = KubeObject & { readonly metadata: KubeObject["metadata"] & { readonly resourceVersion: string } }

const clone = <A>(a: A): A => structuredClone(a)

/** RFC 7386 JSON merge patch. */
const mergePatch = (target: unknown, patch: unknown): unknown => {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch
  const out: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {}
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else out[k] = mergePatch(out[k], v)
  }
  return out
}

/** Minimal stand-ins for the CRD schemas' required fields, so bad writes fail here as they would live. */
const validators: Record<string, (o: KubeObject) => string | undefined> = {
  ippools: (o) => {
    const spec = o["spec"] as { range?: unknown; allocations?: Record<string, Record<string, unknown>> } | undefined
    if (typeof spec?.range !== "string") return "spec.range: Required value"
    if (typeof spec.allocations !== "object" || spec.allocations === null) return "spec.allocations: Required value"
    for (const [k, a] of Object.entries(spec.allocations)) {
      if (typeof a?.["id"] !== "string") return `spec.allocations.${k}.id: Required value`
      if (typeof a["podref"] !== "string") return `spec.allocations.${k}.podref: Required value`
    }
    return undefined
  },
  overlappingrangeipreservations: (o) =>
    typeof (o["spec"] as { podref?: unknown } | undefined)?.podref === "string" ? undefined : "spec.podref: Required value",
  pods: (o) => {
    const containers = (o["spec"] as { containers?: unknown } | undefined)?.containers
    return Array.isArray(containers) && containers.length > 0 ? undefined : "spec.containers: Required value"
  }
}

/** Custom resources: unlike most built-in types, an update must name the resourceVersion it replaces. */
const customResources = new Set(["ippools", "overlappingrangeipreservations", "network-attachment-definitions"])

/** RFC 1123 subdomain, as the API server requires of object names. */
const validName = (name: string): boolean =>
  name.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name)

const namespaceMismatch = (r: Resource, ns: string | undefined, object: KubeObject): boolean =>
  r.namespaced && object.metadata.namespace !== undefined && object.metadata.namespace !== "" && object.metadata.namespace !== ns
const MISMATCH = "the namespace of the provided object does not match the namespace sent on the request"

/**
 * What a watch with a selector is told of a change, as the API server's watch cache tells it:
 * an object that comes to match is ADDED, one that stops matching is DELETED (its last matching
 * content at the change's resourceVersion), one that matches before and after is MODIFIED.
 */
const seenThrough = (selects: (o: KubeObject) => boolean, c: Change): WatchEvent | undefined => {
  const now = c.type !== "DELETED" && selects(c.object)
  const before = c.prev !== undefined && selects(c.prev)
  if (now) return { type: before ? "MODIFIED" : "ADDED", object: clone(c.object) }
  if (!before) return undefined
  return { type: "DELETED", object: clone({ ...c.prev!, metadata: { ...c.prev!.metadata, resourceVersion: c.object.metadata.resourceVersion } }) }
}

/** The mutable world. Methods run synchronously inside Effect.sync, so each one is atomic. */
export class MemoryClusterState {
  private rv = 1
  private readonly objects = new Map<string, Map<string, Stored>>()
  private readonly history = new Map<string, Array<{ rv: number; change: Change }>>()
  private readonly compactedBelow = new Map<string, number>()
  private readonly watchers = new Set<Watcher>()
  private faults: Array<Fault & { remaining: number }> = []
  readonly calls: Array<ApiCall> = []
  readonly historyLimit: number
  readonly latency: Duration.Duration
  readonly requestTimeout: Duration.Duration
  readonly now: () => Date

  constructor(options: MemoryClusterOptions = {}) {
    this.historyLimit = options.historyLimit ?? 10_000
    this.latency = Duration.decode(options.latency ?? 0)
    this.requestTimeout = Duration.decode(options.requestTimeout ?? "30 seconds")
    this.now = options.now ?? (() => new Date())
  }

  private table(plural: string): Map<string, Stored> {
    let t = this.objects.get(plural)
    if (t === undefined) this.objects.set(plural, (t = new Map()))
    return t
  }

  private record(plural: string, type: "ADDED" | "MODIFIED" | "DELETED", object: Stored, prev: Stored | undefined): void {
    const rv = Number(object.metadata.resourceVersion)
    let h = this.history.get(plural)
    if (h === undefined) this.history.set(plural, (h = []))
    const change: Change = { type, object, prev }
    h.push({ rv, change })
    if (h.length > this.historyLimit) {
      const dropped = h.splice(0, h.length - this.historyLimit)
      this.compactedBelow.set(plural, dropped[dropped.length - 1]!.rv + 1)
    }
    for (const w of this.watchers) {
      if (w.plural === plural && (w.namespace === undefined || w.namespace === object.metadata.namespace)) {
        const event = seenThrough(w.selects, change)
        if (event !== undefined) w.emit(event)
      }
    }
  }

  err(reason: KubeErrorReason, verb: Verb, r: Resource, ns: string | undefined, name: string | undefined, detail: string) {
    const status = statusForReason(reason)
    return new KubeError({ reason, verb, target: name === undefined ? r.plural : `${r.plural} ${objectKey(ns, name)}`, status, detail })
  }

  /** Logs the call and applies any matching fault; returns the fault's effect, if one fires. */
  enter(verb: Verb, r: Resource, ns: string | undefined, name: string | undefined): KubeError | "stall" | undefined {
    this.calls.push({ verb, resource: r.plural, namespace: ns, name })
    const fault = this.faults.find(
      (f) =>
        f.remaining > 0 &&
        (f.resource === undefined || f.resource === r.plural) &&
        (f.verb === undefined || (typeof f.verb === "string" ? f.verb === verb : f.verb.includes(verb)))
    )
    if (fault === undefined) return undefined
    fault.remaining--
    this.faults = this.faults.filter((f) => f.remaining > 0)
    if (fault.reason === "stall") return "stall"
    const reason = fault.reason ?? "Unavailable"
    return new KubeError({ reason, verb, target: r.plural, status: statusForReason(reason), detail: "injected fault" })
  }

  injectFault(fault: Fault): void {
    this.faults.push({ ...fault, remaining: fault.times ?? 1 })
  }

  clearFaults(): void {
    this.faults = []
  }

  get(r: Resource, ns: string | undefined, name: string): KubeObject | KubeError {
    const o = this.table(r.plural).get(objectKey(ns, name))
    return o === undefined ? this.err("NotFound", "get", r, ns, name, `${r.plural} "${name}" not found`) : clone(o)
  }

  /** The objects a list's or watch's selectors pick, or why they cannot be read. */
  private selection(
    verb: Verb,
    r: Resource,
    ns: string | undefined,
    options: { readonly labelSelector?: string | undefined; readonly fieldSelector?: string | undefined }
  ): ((o: KubeObject) => boolean) | KubeError {
    const labels = parseLabelSelector(options.labelSelector ?? "")
    if (typeof labels !== "function") return this.err("BadRequest", verb, r, ns, undefined, `unable to parse requirement: "${labels.invalid}"`)
    const fields = parseFieldSelector(r.kind, options.fieldSelector ?? "")
    if (typeof fields !== "function") return this.err("BadRequest", verb, r, ns, undefined, `field label not supported (in memory): "${fields.invalid}"`)
    return (o) => fields(o) && labels(o.metadata.labels ?? {})
  }

  list(r: Resource, ns: string | undefined, options: ListOptions = {}) {
    const selects = this.selection("list", r, ns, options)
    if (selects instanceof KubeError) return selects
    const table = this.table(r.plural)
    const keys = [...table.keys()]
      .filter((k) => (ns === undefined || !r.namespaced || k.startsWith(`${ns}/`)) && selects(table.get(k)!))
      .sort()
    let start = 0
    let listRv = String(this.rv)
    if (options.continue !== undefined && options.continue !== "") {
      let token: { rv: string; after: string }
      try {
        token = JSON.parse(Buffer.from(options.continue, "base64").toString()) as typeof token
      } catch {
        return this.err("BadRequest", "list", r, ns, undefined, "invalid continue token")
      }
      if (Number(token.rv) < (this.compactedBelow.get(r.plural) ?? 0)) {
        return this.err("Gone", "list", r, ns, undefined, "The provided continue parameter is too old")
      }
      listRv = token.rv
      start = keys.findIndex((k) => k > token.after)
      if (start < 0) start = keys.length
    }
    const end = options.limit !== undefined && options.limit > 0 ? Math.min(keys.length, start + options.limit) : keys.length
    const page = keys.slice(start, end)
    const items = page.map((k) => clone(this.table(r.plural).get(k)!))
    const cont = end < keys.length ? Buffer.from(JSON.stringify({ rv: listRv, after: page[page.length - 1] })).toString("base64") : undefined
    return { items, resourceVersion: listRv, continue: cont }
  }

  private store(r: Resource, ns: string | undefined, object: KubeObject, type: "ADDED" | "MODIFIED"): Stored {
    const stored: Stored = {
      ...clone(object),
      apiVersion: apiVersionOf(r),
      kind: r.kind,
      metadata: { ...clone(object.metadata), ...(r.namespaced ? { namespace: ns } : {}), resourceVersion: String(++this.rv) }
    }
    const key = objectKey(ns, stored.metadata.name)
    const prev = this.table(r.plural).get(key)
    this.table(r.plural).set(key, stored)
    this.record(r.plural, type, stored, prev)
    return clone(stored)
  }

  create(r: Resource, ns: string | undefined, object: KubeObject): KubeObject | KubeError {
    if (namespaceMismatch(r, ns, object)) return this.err("BadRequest", "create", r, ns, object.metadata.name, MISMATCH)
    if (!object.metadata.name && !object.metadata.generateName) {
      return this.err("Invalid", "create", r, ns, "", "metadata.name: Required value: name or generateName is required")
    }
    const name = object.metadata.name || `${object.metadata.generateName ?? ""}${randomUUID().slice(0, 5)}`
    if (!validName(name)) return this.err("Invalid", "create", r, ns, name, `metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain is required`)
    if (this.table(r.plural).has(objectKey(ns, name))) {
      return this.err("AlreadyExists", "create", r, ns, name, `${r.plural} "${name}" already exists`)
    }
    const invalid = validators[r.plural]?.(object)
    if (invalid !== undefined) return this.err("Invalid", "create", r, ns, name, invalid)
    const metadata = { ...object.metadata, name, uid: randomUUID(), creationTimestamp: this.now().toISOString() }
    return this.store(r, ns, { ...object, metadata }, "ADDED")
  }

  private update(verb: Verb, r: Resource, ns: string | undefined, current: Stored, next: KubeObject): KubeObject | KubeError {
    const invalid = validators[r.plural]?.(next)
    if (invalid !== undefined) return this.err("Invalid", verb, r, ns, current.metadata.name, invalid)
    // Identity fields are the server's, whatever the client sent.
    const { name, uid, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds } = current.metadata
    const metadata = { ...next.metadata, name, uid, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds }
    const stored = this.store(r, ns, { ...next, metadata }, "MODIFIED")
    // The last finalizer of an object being deleted with no grace left: the API server removes it.
    const finalizers = (next.metadata as Record<string, unknown>)["finalizers"]
    if (deletionTimestamp !== undefined && deletionGracePeriodSeconds === 0 && !(Array.isArray(finalizers) && finalizers.length > 0)) {
      const key = objectKey(ns, name)
      const last = this.table(r.plural).get(key)!
      this.table(r.plural).delete(key)
      this.record(r.plural, "DELETED", { ...last, metadata: { ...last.metadata, resourceVersion: String(++this.rv) } }, last)
    }
    return stored
  }

  replace(r: Resource, ns: string | undefined, object: KubeObject): KubeObject | KubeError {
    const name = object.metadata.name
    const current = this.table(r.plural).get(objectKey(ns, name))
    if (current === undefined) return this.err("NotFound", "replace", r, ns, name, `${r.plural} "${name}" not found`)
    if (namespaceMismatch(r, ns, object)) return this.err("BadRequest", "replace", r, ns, name, MISMATCH)
    const sent = object.metadata.resourceVersion
    if ((sent === undefined || sent === "") && customResources.has(r.plural)) {
      return this.err("Invalid", "replace", r, ns, name, "metadata.resourceVersion: Invalid value: 0: must be specified for an update")
    }
    if (sent !== undefined && sent !== "" && sent !== current.metadata.resourceVersion) {
      return this.err("Conflict", "replace", r, ns, name, "the object has been modified; please apply your changes to the latest version and try again")
    }
    return this.update("replace", r, ns, current, object)
  }

  patch(r: Resource, ns: string | undefined, name: string, patch: Patch): KubeObject | KubeError {
    const current = this.table(r.plural).get(objectKey(ns, name))
    if (current === undefined) return this.err("NotFound", "patch", r, ns, name, `${r.plural} "${name}" not found`)
    if (patch.type === "merge") return this.update("patch", r, ns, current, mergePatch(clone(current), patch.body) as KubeObject)
    try {
      const result = fastJsonPatch.applyPatch(clone(current), clone(patch.ops) as Array<fastJsonPatch.Operation>, true, false)
      return this.update("patch", r, ns, current, result.newDocument)
    } catch (e) {
      const detail = e instanceof Error ? e.message.split("\n")[0]! : String(e)
      return this.err("Invalid", "patch", r, ns, name, `the server rejected our request due to an error in our request: ${detail}`)
    }
  }

  delete(r: Resource, ns: string | undefined, name: string, options: { gracePeriodSeconds?: number | undefined; preconditions?: { uid?: string | undefined; resourceVersion?: string | undefined } | undefined } = {}): void | KubeError {
    const key = objectKey(ns, name)
    const current = this.table(r.plural).get(key)
    if (current === undefined) return this.err("NotFound", "delete", r, ns, name, `${r.plural} "${name}" not found`)
    const pre = options.preconditions
    if ((pre?.uid !== undefined && pre.uid !== current.metadata.uid) || (pre?.resourceVersion !== undefined && pre.resourceVersion !== current.metadata.resourceVersion)) {
      return this.err("Conflict", "delete", r, ns, name, "Precondition failed")
    }
    const spec = current["spec"] as { nodeName?: string } | undefined
    const grace = options.gracePeriodSeconds
    const finalizers = current.metadata["finalizers"]
    const held = Array.isArray(finalizers) && finalizers.length > 0
    // Like the API server: a scheduled pod deleted with a grace period only starts terminating
    // (its deletionTimestamp is when the grace period ends), and an object with finalizers stays
    // until they are removed.
    if (held || (r.plural === "pods" && grace !== 0 && spec?.nodeName !== undefined)) {
      if (current.metadata.deletionTimestamp !== undefined) return
      const seconds = r.plural === "pods" ? (grace ?? 30) : 0
      const stamped: Stored = {
        ...current,
        metadata: {
          ...current.metadata,
          deletionTimestamp: new Date(this.now().getTime() + seconds * 1000).toISOString(),
          deletionGracePeriodSeconds: seconds,
          resourceVersion: String(++this.rv)
        }
      }
      this.table(r.plural).set(key, stamped)
      this.record(r.plural, "MODIFIED", stamped, current)
      return
    }
    this.table(r.plural).delete(key)
    this.record(r.plural, "DELETED", { ...current, metadata: { ...current.metadata, resourceVersion: String(++this.rv) } }, current)
  }

  /**
   * Starts a watch; returns an unsubscribe function, or Gone when `fromRv` was compacted away.
   * From "" or "0" it starts, like the API server, with an ADDED event per current object.
   */
  watch(
    r: Resource,
    ns: string | undefined,
    options: { readonly resourceVersion?: string | undefined; readonly labelSelector?: string | undefined; readonly fieldSelector?: string | undefined },
    watcher: Omit<Watcher, "plural" | "namespace" | "selects">
  ): (() => void) | KubeError {
    const selects = this.selection("watch", r, ns, options)
    if (selects instanceof KubeError) return selects
    const fromRv = options.resourceVersion ?? ""
    if (fromRv === "" || fromRv === "0") {
      for (const object of this.snapshot(r, ns)) if (selects(object)) watcher.emit({ type: "ADDED", object })
    } else {
      const from = Number(fromRv)
      if (!Number.isFinite(from) || from + 1 < (this.compactedBelow.get(r.plural) ?? 0)) {
        return this.err("Gone", "watch", r, ns, undefined, `too old resource version: ${fromRv}`)
      }
      for (const { rv, change } of this.history.get(r.plural) ?? []) {
        if (rv <= from || (ns !== undefined && change.object.metadata.namespace !== ns)) continue
        const event = seenThrough(selects, change)
        if (event !== undefined) watcher.emit(event)
      }
    }
    const w: Watcher = { plural: r.plural, namespace: ns, selects, ...watcher }
    this.watchers.add(w)
    return () => this.watchers.delete(w)
  }

  /** Drops all watch history: every watch or continue token from before now answers 410. */
  compact(): void {
    for (const plural of this.history.keys()) this.compactedBelow.set(plural, this.rv + 1)
    this.history.clear()
  }

  /** Ends every open watch, as an API server restart or timeout does. */
  closeWatches(): void {
    for (const w of [...this.watchers]) {
      this.watchers.delete(w)
      w.end()
    }
  }

  /**
   * What the taint manager does to a pod of an unreachable node once its toleration runs out: it
   * marks the pod (DisruptionTarget, DeletionByTaintManager) and deletes it; with no kubelet to
   * confirm, the pod stays Terminating.
   */
  taintManagerEvict(ns: string, name: string, pods: Resource): void {
    const key = objectKey(ns, name)
    const current = this.table(pods.plural).get(key)
    if (current === undefined) return
    const status = (current["status"] ?? {}) as { conditions?: ReadonlyArray<unknown> }
    const marked: Stored = {
      ...current,
      status: { ...status, conditions: [...(status.conditions ?? []), { type: "DisruptionTarget", status: "True", reason: "DeletionByTaintManager", message: "Taint manager: deleting due to NoExecute taint" }] },
      metadata: { ...current.metadata, deletionTimestamp: new Date(this.now().getTime() + 30_000).toISOString(), deletionGracePeriodSeconds: 30, resourceVersion: String(++this.rv) }
    }
    this.table(pods.plural).set(key, marked)
    this.record(pods.plural, "MODIFIED", marked, current)
  }

  /** What a kubelet does when a terminating pod's containers are gone: remove the object. */
  finishPodTermination(ns: string, name: string, pods: Resource): void {
    const key = objectKey(ns, name)
    const current = this.table(pods.plural).get(key)
    if (current === undefined) return
    this.table(pods.plural).delete(key)
    this.record(pods.plural, "DELETED", { ...current, metadata: { ...current.metadata, resourceVersion: String(++this.rv) } }, current)
  }

  /** Objects of a resource, for assertions (copies). */
  snapshot(r: Resource, ns?: string): ReadonlyArray<KubeObject> {
    const page = this.list(r, ns)
    return page instanceof KubeError ? [] : page.items
  }

  /** Number of logged calls matching the filter. */
  count(filter: Partial<ApiCall> = {}): number {
    return this.calls.filter(
      (c) =>
        (filter.verb === undefined || c.verb === filter.verb) &&
        (filter.resource === undefined || c.resource === filter.resource) &&
        (filter.namespace === undefined || c.namespace === filter.namespace) &&
        (filter.name === undefined || c.name === filter.name)
    ).length
  }

  resetCalls(): void {
    this.calls.length = 0
  }
}

export class InMemoryCluster extends Context.Tag("whereabouts-controller/InMemoryCluster")<InMemoryCluster, MemoryClusterState>() {
  /** A fresh, empty cluster. */
  static layer = (options?: MemoryClusterOptions): Layer.Layer<InMemoryCluster> =>
    Layer.sync(InMemoryCluster, () => new MemoryClusterState(options))
}

const call = <A>(
  state: MemoryClusterState,
  verb: Verb,
  r: Resource,
  ns: string | undefined,
  name: string | undefined,
  body: () => A | KubeError
): Effect.Effect<A, KubeError> =>
  Effect.suspend(() => {
    const fault = state.enter(verb, r, ns, name)
    const stalled = Effect.sleep(state.requestTimeout).pipe(
      Effect.zipRight(Effect.fail(state.err("Timeout", verb, r, ns, name, `no answer within ${Duration.format(state.requestTimeout)}`)))
    )
    const run = fault === "stall" ? stalled : fault !== undefined ? Effect.fail(fault) : Effect.suspend(() => {
      const out = body()
      return out instanceof KubeError ? Effect.fail(out) : Effect.succeed(out)
    })
    return Duration.toMillis(state.latency) > 0 ? Effect.zipRight(Effect.sleep(state.latency), run) : run
  })

const metadataIf = (options: ReadOptions | undefined, out: KubeObject | KubeError): KubeObject | KubeError =>
  out instanceof KubeError || options?.metadataOnly !== true ? out : partialObjectMetadata(out)

/** KubeApi over the shared in-memory cluster. */
export const makeMemoryKubeApi = (state: MemoryClusterState): KubeApiShape => ({
  get: (r, ns, name, options) => call(state, "get", r, ns, name, () => metadataIf(options, state.get(r, ns, name))),
  list: (r, ns, options) =>
    call(state, "list", r, ns, undefined, () => {
      const out = state.list(r, ns, options)
      if (out instanceof KubeError) return out
      if (options?.namesOnly === true && ns !== undefined) return { ...out, items: out.items.map((o) => nameOnly(o.metadata.name, o.metadata.namespace)) }
      return options?.metadataOnly !== true ? out : { ...out, items: out.items.map(partialObjectMetadata) }
    }),
  create: (r, ns, object) => call(state, "create", r, ns, object.metadata.name, () => state.create(r, ns, object)),
  replace: (r, ns, object) => call(state, "replace", r, ns, object.metadata.name, () => state.replace(r, ns, object)),
  patch: (r, ns, name, patch, options) => call(state, "patch", r, ns, name, () => metadataIf(options, state.patch(r, ns, name, patch))),
  delete: (r, ns, name, options) => call(state, "delete", r, ns, name, () => state.delete(r, ns, name, options)),
  watch: (r, ns, options) =>
    Stream.asyncScoped<WatchEvent, KubeError>((emit) =>
      Effect.gen(function* () {
        const fault = state.enter("watch", r, ns, undefined)
        if (fault instanceof KubeError) return void emit.fail(fault)
        // A stalled watch is deaf: it delivers nothing until closeWatches() ends it.
        const unsubscribe = state.watch(r, ns, options, {
          emit: fault === "stall" ? () => {} : (e) => void emit.single(e),
          end: () => void emit.end()
        })
        if (unsubscribe instanceof KubeError) return void emit.fail(unsubscribe)
        yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
        // The API server ends a watch after timeoutSeconds; the consumer resumes from its last version.
        if (options.timeoutSeconds !== undefined) {
          yield* Effect.forkScoped(Effect.sleep(Duration.seconds(options.timeoutSeconds)).pipe(Effect.andThen(() => emit.end())))
        }
      })
    )
})

/** KubeApi backed by the InMemoryCluster in context. */
export const layerMemory: Layer.Layer<KubeApi, never, InMemoryCluster> = Layer.effect(
  KubeApi,
  Effect.map(InMemoryCluster, makeMemoryKubeApi)
)
