/**
 * KubeApi: the single boundary to a Kubernetes API server — generic REST verbs over plain JSON objects.
 * Two implementations: `KubeApiLive.ts` and `InMemoryCluster.ts` (an in-process API server emulation,
 * the role client-go's fake tracker plays). Every other service is written once, over this tag.
 */
import { Context, Effect, Option, Stream } from "effect"
import { KubeError } from "./KubeError.ts"
import type { Resource } from "./resources.ts"

export interface ObjectMeta {
  readonly name: string
  readonly namespace?: string | undefined
  readonly uid?: string | undefined
  readonly resourceVersion?: string | undefined
  readonly generateName?: string | undefined
  readonly deletionTimestamp?: string | undefined
  readonly deletionGracePeriodSeconds?: number | undefined
  readonly labels?: Readonly<Record<string, string>> | undefined
  readonly annotations?: Readonly<Record<string, string>> | undefined
  readonly [key: string]: unknown
}

/** Any API object, as JSON. Services decode the parts they need with Schema. */
export interface KubeObject {
  readonly apiVersion?: string | undefined
  readonly kind?: string | undefined
  readonly metadata: ObjectMeta
  readonly [key: string]: unknown
}

export type JsonPatchOp =
  | { readonly op: "add" | "replace" | "test"; readonly path: string; readonly value: unknown }
  | { readonly op: "remove"; readonly path: string }

export type Patch =
  | { readonly type: "json"; readonly ops: ReadonlyArray<JsonPatchOp> }
  | { readonly type: "merge"; readonly body: unknown }

export interface ReadOptions {
  /** The server answers with PartialObjectMetadata (for a list, such items), as to client-go's metadata client: a fraction of the bytes. */
  readonly metadataOnly?: boolean | undefined
  /**
   * Lists in one namespace only (other reads ignore it): items of name and namespace alone, which the
   * server sends as a Table of names (`includeObject=None`), for callers asking which objects exist.
   */
  readonly namesOnly?: boolean | undefined
}

/** The metadata-only form of an object, as the API server returns it for `metadataOnly`. */
export const partialObjectMetadata = (o: KubeObject): KubeObject => ({ apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata: o.metadata })

/** The names-only form of an object, as a `namesOnly` list returns it. */
export const nameOnly = (name: string, namespace: string | undefined): KubeObject =>
  partialObjectMetadata({ metadata: namespace === undefined ? { name } : { name, namespace } })

export interface ListOptions extends ReadOptions {
  readonly limit?: number | undefined
  readonly continue?: string | undefined
  readonly labelSelector?: string | undefined
  readonly fieldSelector?: string | undefined
}

export interface ListResult {
  readonly items: ReadonlyArray<KubeObject>
  readonly resourceVersion: string
  readonly continue?: string | undefined
}

export interface DeleteOptions {
  readonly gracePeriodSeconds?: number | undefined
  readonly preconditions?: { readonly uid?: string | undefined; readonly resourceVersion?: string | undefined } | undefined
}

export interface WatchOptions {
  /** Events after this resourceVersion. */
  readonly resourceVersion: string
  readonly labelSelector?: string | undefined
  readonly fieldSelector?: string | undefined
  /** Ask the server to end the watch after this long (it is then resumed from the last version). */
  readonly timeoutSeconds?: number | undefined
}

export type WatchEvent =
  | { readonly type: "ADDED" | "MODIFIED" | "DELETED"; readonly object: KubeObject }
  | { readonly type: "BOOKMARK"; readonly resourceVersion: string }

export interface KubeApiShape {
  readonly get: (r: Resource, namespace: string | undefined, name: string, options?: ReadOptions) => Effect.Effect<KubeObject, KubeError>
  /** One page; `namespace` undefined lists across namespaces. */
  readonly list: (r: Resource, namespace: string | undefined, options?: ListOptions) => Effect.Effect<ListResult, KubeError>
  readonly create: (r: Resource, namespace: string | undefined, object: KubeObject) => Effect.Effect<KubeObject, KubeError>
  /** PUT; fails with Conflict when `object.metadata.resourceVersion` is stale. */
  readonly replace: (r: Resource, namespace: string | undefined, object: KubeObject) => Effect.Effect<KubeObject, KubeError>
  /** The patched object (with `metadataOnly`: its metadata only). */
  readonly patch: (r: Resource, namespace: string | undefined, name: string, patch: Patch, options?: ReadOptions) => Effect.Effect<KubeObject, KubeError>
  readonly delete: (r: Resource, namespace: string | undefined, name: string, options?: DeleteOptions) => Effect.Effect<void, KubeError>
  /**
   * Events after `options.resourceVersion`. Ends when the server closes the watch; fails with
   * reason "Gone" when that version is too old (relist), other reasons for other failures.
   */
  readonly watch: (r: Resource, namespace: string | undefined, options: WatchOptions) => Stream.Stream<WatchEvent, KubeError>
}

export class KubeApi extends Context.Tag("whereabouts-controller/KubeApi")<KubeApi, KubeApiShape>() {}

/** One request as a decorator sees it: its verb, resource, namespace and object (none for a list). */
export interface RequestInfo {
  readonly verb: "get" | "list" | "create" | "replace" | "patch" | "delete"
  readonly resource: Resource
  readonly namespace: string | undefined
  readonly name: string | undefined
}

/**
 * `api` with every request passed through `request`, and every watch through `watch` (unchanged when
 * left out): a decorator (metrics, flow control, test hooks) states its concern once, not per verb.
 */
export const around = (
  api: KubeApiShape,
  request: <A>(info: RequestInfo, effect: Effect.Effect<A, KubeError>) => Effect.Effect<A, KubeError>,
  watch: (resource: Resource, events: Stream.Stream<WatchEvent, KubeError>) => Stream.Stream<WatchEvent, KubeError> = (_r, events) => events
): KubeApiShape => ({
  get: (r, ns, name, o) => request({ verb: "get", resource: r, namespace: ns, name }, api.get(r, ns, name, o)),
  list: (r, ns, o) => request({ verb: "list", resource: r, namespace: ns, name: undefined }, api.list(r, ns, o)),
  create: (r, ns, o) => request({ verb: "create", resource: r, namespace: ns, name: o.metadata.name }, api.create(r, ns, o)),
  replace: (r, ns, o) => request({ verb: "replace", resource: r, namespace: ns, name: o.metadata.name }, api.replace(r, ns, o)),
  patch: (r, ns, name, p, o) => request({ verb: "patch", resource: r, namespace: ns, name }, api.patch(r, ns, name, p, o)),
  delete: (r, ns, name, o) => request({ verb: "delete", resource: r, namespace: ns, name }, api.delete(r, ns, name, o)),
  watch: (r, ns, o) => watch(r, Stream.suspend(() => api.watch(r, ns, o)))
})

/** What `read` answers, or none when the object does not exist. */
export const ifExists = <A>(read: Effect.Effect<A, KubeError>): Effect.Effect<Option.Option<A>, KubeError> =>
  read.pipe(Effect.map(Option.some), Effect.catchIf((e) => e.reason === "NotFound", () => Effect.succeedNone))

/** `namespace/name` or `name`, for messages. */
export const objectKey = (namespace: string | undefined, name: string): string =>
  namespace === undefined || namespace === "" ? name : `${namespace}/${name}`

/** What a paginated list selects, and the page size (500 unless said). */
export type PageOptions = Omit<ListOptions, "limit" | "continue"> & { readonly pageSize?: number | undefined }

/**
 * Lists every page (`limit`/`continue`), handing each page to `onPage` as it arrives so callers
 * keep only what they need of each object (a page of full pods is garbage before the next one
 * is fetched). An expired continue token (410) restarts the list once from the beginning, as
 * client-go's pager does; `onStart` runs before every (re)start so callers can reset.
 */
export const forEachPage = <E, R>(
  r: Resource,
  namespace: string | undefined,
  onPage: (items: ReadonlyArray<KubeObject>) => Effect.Effect<void, E, R>,
  options: PageOptions & { readonly onStart?: () => void } = {}
): Effect.Effect<string, KubeError | E, KubeApi | R> =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const { onStart, pageSize = 500, ...selection } = options
    const once = Effect.gen(function* () {
      onStart?.()
      let resourceVersion: string | undefined
      let token: string | undefined
      do {
        const page = yield* api.list(r, namespace, { ...selection, limit: pageSize, continue: token })
        // The list's version is the snapshot of the first page; later pages belong to it.
        resourceVersion ??= page.resourceVersion
        // The API server sends "" (or nothing) on the last page.
        token = page.continue === "" ? undefined : page.continue
        yield* onPage(page.items)
      } while (token !== undefined)
      return resourceVersion
    })
    return yield* once.pipe(Effect.catchIf((e): e is KubeError => e instanceof KubeError && e.reason === "Gone", () => once))
  })

/** Every object of every page, each projected as its page arrives, and the list's resourceVersion. */
export const listProjected = <A>(
  r: Resource,
  namespace: string | undefined,
  project: (o: KubeObject) => A,
  options: PageOptions = {}
): Effect.Effect<{ readonly items: ReadonlyArray<A>; readonly resourceVersion: string }, KubeError, KubeApi> =>
  // Suspended: the buffer belongs to one run, not to the effect value services keep (it would hold the last list).
  Effect.suspend(() => {
    let items: Array<A> = []
    return Effect.map(
      forEachPage(r, namespace, (page) => Effect.sync(() => void page.forEach((o) => items.push(project(o)))), { ...options, onStart: () => void (items = []) }),
      (resourceVersion) => ({ items, resourceVersion })
    )
  })

/** Every object of every page, and the list's resourceVersion. */
export const listAll = (r: Resource, namespace: string | undefined, options: PageOptions = {}) => listProjected(r, namespace, (o) => o, options)

/** listProjected's items, listed through `api`. */
export const listItems = <A>(api: KubeApiShape, r: Resource, namespace: string | undefined, project: (o: KubeObject) => A, options: PageOptions = {}) =>
  Effect.map(listProjected(r, namespace, project, options), ({ items }) => items).pipe(Effect.provideService(KubeApi, api))

/** A KubeError for callers that validate what the API returned. */
export const malformed = (verb: string, target: string, detail: string, cause?: unknown): KubeError =>
  new KubeError({ reason: "Unknown", verb, target, detail: `malformed response: ${detail}`, ...(cause === undefined ? {} : { cause }) })
