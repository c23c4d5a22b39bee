/**
 * What every KubeApi must do, written once: run against the in-memory cluster here and
 * against a real kube-apiserver by the live tier.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, type Layer, Stream } from "effect"
import { KubeApi, listAll } from "../../../src/services/KubeApi.ts"
import * as R from "../../../src/services/resources.ts"
import { namespaceObject, podObject, poolObject } from "../../support/objects.ts"

export interface ContractTarget {
  readonly name: string
  readonly layer: Layer.Layer<KubeApi>
  /** A namespace of its own per suite run (live clusters are shared). */
  readonly namespace: string
}

const ensureNamespace = (ns: string) =>
  Effect.flatMap(KubeApi, (api) =>
    api.create(R.Namespaces, undefined, namespaceObject(ns)).pipe(Effect.catchIf((e) => e.reason === "AlreadyExists", () => Effect.void))
  )

export const kubeApiContract = (target: ContractTarget) =>
  describe(`KubeApi contract (${target.name})`, () => {
    const ns = target.namespace
    const run = <A, E>(e: Effect.Effect<A, E, KubeApi>) =>
      Effect.gen(function* () {
        yield* ensureNamespace(ns)
        return yield* e
      }).pipe(Effect.provide(target.layer))

    it.live("create, get, AlreadyExists, NotFound", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const created = yield* api.create(R.IPPools, ns, poolObject(ns, "c1", "10.1.0.0/24"))
          expect(created.metadata.resourceVersion).toBeTruthy()
          expect(created.metadata.uid).toBeTruthy()
          const got = yield* api.get(R.IPPools, ns, "c1")
          expect(got["spec"]).toEqual({ range: "10.1.0.0/24", allocations: {} })
          const again = yield* Effect.either(api.create(R.IPPools, ns, poolObject(ns, "c1", "10.1.0.0/24")))
          expect(Either.isLeft(again) && again.left.reason).toBe("AlreadyExists")
          const missing = yield* Effect.either(api.get(R.IPPools, ns, "nope"))
          expect(Either.isLeft(missing) && missing.left.reason).toBe("NotFound")
        })
      ))

    it.live("replace with a stale resourceVersion is a Conflict", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const a = yield* api.create(R.IPPools, ns, poolObject(ns, "c2", "10.2.0.0/24"))
          yield* api.replace(R.IPPools, ns, { ...a, spec: { range: "10.2.0.0/24", allocations: { "1": { id: "x", podref: "a/b" } } } })
          const stale = yield* Effect.either(api.replace(R.IPPools, ns, { ...a, spec: { range: "10.2.0.0/24", allocations: {} } }))
          expect(Either.isLeft(stale) && stale.left.reason).toBe("Conflict")
        })
      ))

    it.live("a JSON patch whose test fails is Invalid (422) and changes nothing", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          yield* api.create(R.IPPools, ns, poolObject(ns, "c3", "10.3.0.0/24", { "1": { id: "a", podref: "x/y" } }))
          const failed = yield* Effect.either(
            api.patch(R.IPPools, ns, "c3", {
              type: "json",
              ops: [
                { op: "test", path: "/spec/allocations/1/podref", value: "x/other" },
                { op: "remove", path: "/spec/allocations/1" }
              ]
            })
          )
          expect(Either.isLeft(failed) && failed.left.reason).toBe("Invalid")
          expect((yield* api.get(R.IPPools, ns, "c3"))["spec"]).toMatchObject({ allocations: { "1": { id: "a" } } })
          const ok = yield* api.patch(R.IPPools, ns, "c3", {
            type: "json",
            ops: [
              { op: "test", path: "/spec/allocations/1/podref", value: "x/y" },
              { op: "remove", path: "/spec/allocations/1" }
            ]
          })
          expect(ok["spec"]).toEqual({ range: "10.3.0.0/24", allocations: {} })
        })
      ))

    it.live("metadataOnly: get, list and a patch's answer carry metadata only (PartialObjectMetadata)", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          yield* api.create(R.IPPools, ns, poolObject(ns, "m1", "10.9.0.0/24", { "1": { id: "a", podref: "x/y" }, "2": { id: "b", podref: "x/z" } }))
          yield* api.create(R.Pods, ns, podObject(ns, "meta-pod", { status: "[]" }))
          const pool = yield* api.get(R.IPPools, ns, "m1", { metadataOnly: true })
          expect(pool).toMatchObject({ apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata: { name: "m1", namespace: ns } })
          expect(pool["spec"]).toBeUndefined()
          const pod = yield* api.get(R.Pods, ns, "meta-pod", { metadataOnly: true })
          expect(pod.metadata.annotations).toEqual({ "k8s.v1.cni.cncf.io/network-status": "[]" })
          expect(pod["spec"]).toBeUndefined()
          expect(pod["status"]).toBeUndefined()
          const list = yield* api.list(R.Pods, ns, { metadataOnly: true })
          expect(list.items.map((o) => o.metadata.name)).toContain("meta-pod")
          for (const o of list.items) expect([o["spec"], o["status"]]).toEqual([undefined, undefined])
          expect(list.resourceVersion).toBeTruthy()
          const patched = yield* api.patch(
            R.IPPools,
            ns,
            "m1",
            { type: "json", ops: [{ op: "test", path: "/spec/allocations/1/podref", value: "x/y" }, { op: "remove", path: "/spec/allocations/1" }] },
            { metadataOnly: true }
          )
          expect(patched["spec"]).toBeUndefined()
          expect(patched.metadata.resourceVersion).not.toBe(pool.metadata.resourceVersion)
          // The write happened in full; only the answer was trimmed.
          expect((yield* api.get(R.IPPools, ns, "m1"))["spec"]).toEqual({ range: "10.9.0.0/24", allocations: { "2": { id: "b", podref: "x/z" } } })
          const missing = yield* Effect.either(api.get(R.Pods, ns, "no-such-pod", { metadataOnly: true }))
          expect(Either.isLeft(missing) && missing.left.reason).toBe("NotFound")
        })
      ))

    it.live("namesOnly: a namespace's list carries each object's name and namespace and nothing else, page by page", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          for (const name of ["names-a", "names-b", "names-c"]) yield* api.create(R.Pods, ns, podObject(ns, name, { status: "[]" }))
          yield* api.create(R.IPPools, ns, poolObject(ns, "names-pool", "10.8.0.0/24", { "1": { id: "a", podref: "x/y" } }))
          const first = yield* api.list(R.Pods, ns, { namesOnly: true, limit: 2 })
          expect(first.items).toHaveLength(2)
          expect(first.continue).toBeTruthy()
          const rest = yield* api.list(R.Pods, ns, { namesOnly: true, limit: 2, continue: first.continue })
          const items = [...first.items, ...rest.items].filter((o) => o.metadata.name.startsWith("names-"))
          expect(items.map((o) => o.metadata.name).sort()).toEqual(["names-a", "names-b", "names-c"])
          for (const o of items) expect(o).toEqual({ apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata: { name: o.metadata.name, namespace: ns } })
          expect(first.resourceVersion).toBeTruthy()
          const pools = yield* api.list(R.IPPools, ns, { namesOnly: true })
          expect(pools.items.map((o) => o.metadata)).toContainEqual({ name: "names-pool", namespace: ns })
          for (const o of pools.items) expect(o["spec"]).toBeUndefined()
        })
      ))

    it.live("merge patch", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          yield* api.create(R.IPPools, ns, poolObject(ns, "c4", "10.4.0.0/24"))
          const out = yield* api.patch(R.IPPools, ns, "c4", { type: "merge", body: { metadata: { labels: { a: "b" } } } })
          expect(out.metadata.labels).toEqual({ a: "b" })
        })
      ))

    it.live("list pages through every object with limit/continue", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          for (let i = 0; i < 7; i++) yield* api.create(R.OverlappingRangeIPReservations, ns, { metadata: { name: `r${i}`, namespace: ns }, spec: { podref: `p/${i}` } })
          const first = yield* api.list(R.OverlappingRangeIPReservations, ns, { limit: 3 })
          expect(first.items).toHaveLength(3)
          expect(first.continue).toBeTruthy()
          const all = yield* listAll(R.OverlappingRangeIPReservations, ns, { pageSize: 3 })
          expect(all.items.map((o) => o.metadata.name).sort()).toEqual(["r0", "r1", "r2", "r3", "r4", "r5", "r6"])
        })
      ))

    it.live("delete: NotFound when absent; stale precondition is a Conflict", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const r = yield* api.create(R.OverlappingRangeIPReservations, ns, { metadata: { name: "d1", namespace: ns }, spec: { podref: "a/b" } })
          yield* api.replace(R.OverlappingRangeIPReservations, ns, { ...r, spec: { podref: "a/c" } })
          const stale = yield* Effect.either(
            api.delete(R.OverlappingRangeIPReservations, ns, "d1", { preconditions: { resourceVersion: r.metadata.resourceVersion } })
          )
          expect(Either.isLeft(stale) && stale.left.reason).toBe("Conflict")
          yield* api.delete(R.OverlappingRangeIPReservations, ns, "d1")
          const gone = yield* Effect.either(api.delete(R.OverlappingRangeIPReservations, ns, "d1"))
          expect(Either.isLeft(gone) && gone.left.reason).toBe("NotFound")
        })
      ))

    it.live("watch from a list's resourceVersion sees later changes in order", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const start = yield* api.list(R.IPPools, ns, { limit: 1 })
          yield* api.create(R.IPPools, ns, poolObject(ns, "w1", "10.9.0.0/24"))
          yield* api.patch(R.IPPools, ns, "w1", { type: "merge", body: { metadata: { labels: { x: "1" } } } })
          yield* api.delete(R.IPPools, ns, "w1")
          const events = yield* api.watch(R.IPPools, ns, { resourceVersion: start.resourceVersion }).pipe(
            Stream.filter((e) => e.type !== "BOOKMARK" && e.object.metadata.name === "w1"),
            Stream.take(3),
            Stream.runCollect,
            Effect.timeout("20 seconds")
          )
          expect(Chunk.toArray(events).map((e) => e.type)).toEqual(["ADDED", "MODIFIED", "DELETED"])
        })
      ))

    // What a real API server rejects, so the in-memory cluster must too (found by the live tier).
    it.live("rejects what the API server rejects: no containers, bad names, foreign namespace, bad continue", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const reason = <A>(e: Effect.Effect<A, { readonly reason: string }>) =>
            Effect.map(Effect.either(e), (x) => (Either.isLeft(x) ? x.left.reason : "ok"))
          expect(yield* reason(api.create(R.Pods, ns, { metadata: { name: "nc" }, spec: {} }))).toBe("Invalid")
          expect(yield* reason(api.create(R.IPPools, ns, poolObject(ns, "Bad_Name", "10.5.0.0/24")))).toBe("Invalid")
          expect(yield* reason(api.create(R.IPPools, ns, { metadata: { name: "" }, spec: { range: "10.5.0.0/24", allocations: {} } }))).toBe("Invalid")
          expect(yield* reason(api.create(R.IPPools, ns, poolObject(`${ns}-other`, "elsewhere", "10.5.0.0/24")))).toBe("BadRequest")
          expect(yield* reason(api.list(R.IPPools, ns, { continue: "garbage" }))).toBe("BadRequest")
          const generated = yield* api.create(R.IPPools, ns, { metadata: { name: "", generateName: "gen-" }, spec: { range: "10.5.0.0/24", allocations: {} } })
          expect(generated.metadata.name).toMatch(/^gen-[a-z0-9]{5}$/)
        })
      ))

    it.live("a custom resource's replace must carry a resourceVersion (built-in types need not)", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const pool = yield* api.create(R.IPPools, ns, poolObject(ns, "norv", "10.6.0.0/24"))
          const { resourceVersion: _pool, ...poolMeta } = pool.metadata
          const unconditional = yield* Effect.either(api.replace(R.IPPools, ns, { ...pool, metadata: poolMeta }))
          expect(Either.isLeft(unconditional) && unconditional.left.reason).toBe("Invalid")
          const pod = yield* api.create(R.Pods, ns, podObject(ns, "norv"))
          const { resourceVersion: _pod, ...podMeta } = pod.metadata
          yield* api.replace(R.Pods, ns, { ...pod, metadata: { ...podMeta, labels: { a: "b" } } })
        })
      ))

    it.live("a watch from \"\" starts with the current objects; timeoutSeconds ends it", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          yield* api.create(R.OverlappingRangeIPReservations, ns, { metadata: { name: "w-a", namespace: ns }, spec: { podref: "a/a" } })
          yield* api.create(R.OverlappingRangeIPReservations, ns, { metadata: { name: "w-b", namespace: ns }, spec: { podref: "a/b" } })
          yield* api.delete(R.OverlappingRangeIPReservations, ns, "w-b")
          const events = yield* api.watch(R.OverlappingRangeIPReservations, ns, { resourceVersion: "", timeoutSeconds: 1 }).pipe(
            Stream.runCollect,
            Effect.timeout("20 seconds")
          )
          const seen = Chunk.toArray(events).flatMap((e) => (e.type === "BOOKMARK" || !e.object.metadata.name.startsWith("w-") ? [] : [`${e.type} ${e.object.metadata.name}`]))
          expect(seen).toEqual(["ADDED w-a"])
        })
      ))

    it.live("fieldSelector metadata.name=: list and watch see that one object only", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const cm = (name: string, v: string) => ({ metadata: { name, namespace: ns }, data: { k: v } })
          yield* api.create(R.ConfigMaps, ns, cm("fs-a", "1"))
          yield* api.create(R.ConfigMaps, ns, cm("fs-b", "1"))
          const only = { fieldSelector: "metadata.name=fs-a" }
          const listed = yield* api.list(R.ConfigMaps, ns, only)
          expect(listed.items.map((o) => o.metadata.name)).toEqual(["fs-a"])
          const b = yield* api.get(R.ConfigMaps, ns, "fs-b")
          yield* api.replace(R.ConfigMaps, ns, { ...b, data: { k: "2" } })
          const a = yield* api.get(R.ConfigMaps, ns, "fs-a")
          yield* api.replace(R.ConfigMaps, ns, { ...a, data: { k: "2" } })
          const events = yield* api.watch(R.ConfigMaps, ns, { ...only, resourceVersion: listed.resourceVersion }).pipe(
            Stream.filter((e) => e.type !== "BOOKMARK"),
            Stream.take(1),
            Stream.runCollect,
            Effect.timeout("20 seconds")
          )
          expect(Chunk.toArray(events).map((e) => `${e.type} ${e.object.metadata.name} ${JSON.stringify(e.object["data"])}`)).toEqual([
            'MODIFIED fs-a {"k":"2"}'
          ])
        })
      ))

    it.live("fieldSelector on pods: spec.nodeName and status.phase, = and !=; a field the kind does not index is a 400", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const pod = (name: string, nodeName: string) => ({ metadata: { name, namespace: ns, labels: { contract: "fsel" } }, spec: { nodeName, containers: [{ name: "c", image: "i" }] } })
          yield* api.create(R.Pods, ns, pod("fsel-a", "node-a"))
          yield* api.create(R.Pods, ns, pod("fsel-b", "node-b"))
          const names = (fieldSelector: string) =>
            Effect.map(api.list(R.Pods, ns, { labelSelector: "contract=fsel", fieldSelector }), (l) => l.items.map((o) => o.metadata.name))
          expect(yield* names("spec.nodeName=node-a")).toEqual(["fsel-a"])
          expect(yield* names("spec.nodeName!=node-a")).toEqual(["fsel-b"])
          expect(yield* names(`metadata.namespace=${ns},status.phase!=Succeeded`)).toEqual(["fsel-a", "fsel-b"])
          const bad = yield* Effect.either(api.list(R.Pods, ns, { fieldSelector: "spec.noSuchField=x" }))
          expect(Either.isLeft(bad) && bad.left.reason).toBe("BadRequest")
          const crd = yield* Effect.either(api.list(R.IPPools, ns, { fieldSelector: "spec.range=10.0.0.0/8" }))
          expect(Either.isLeft(crd) && crd.left.reason).toBe("BadRequest")
        })
      ))

    it.live("labelSelector: a list sees the matching objects; a watch sees one relabelled out as DELETED and one relabelled in as ADDED", () =>
      run(
        Effect.gen(function* () {
          const api = yield* KubeApi
          const cm = (name: string, labels: Record<string, string>) => ({ metadata: { name, namespace: ns, labels: { contract: "ls", ...labels } }, data: { k: "1" } })
          yield* api.create(R.ConfigMaps, ns, cm("ls-a", { app: "x", tier: "web" }))
          yield* api.create(R.ConfigMaps, ns, cm("ls-b", { app: "y" }))
          yield* api.create(R.ConfigMaps, ns, cm("ls-c", {}))
          const names = (labelSelector: string) => Effect.map(api.list(R.ConfigMaps, ns, { labelSelector: `contract=ls,${labelSelector}` }), (l) => l.items.map((o) => o.metadata.name))
          expect(yield* names("app in (x,z),tier")).toEqual(["ls-a"])
          expect(yield* names("app!=x")).toEqual(["ls-b", "ls-c"])
          expect(yield* names("app notin (x)")).toEqual(["ls-b", "ls-c"])
          expect(yield* names("!app")).toEqual(["ls-c"])
          expect(yield* names("app==y")).toEqual(["ls-b"])
          const bad = yield* Effect.either(api.list(R.ConfigMaps, ns, { labelSelector: "app in x" }))
          expect(Either.isLeft(bad) && bad.left.reason).toBe("BadRequest")

          const listed = yield* api.list(R.ConfigMaps, ns, { labelSelector: "contract=ls,app=x" })
          const relabel = (name: string, app: string) => api.patch(R.ConfigMaps, ns, name, { type: "merge", body: { metadata: { labels: { app } } } })
          yield* relabel("ls-a", "y")
          yield* relabel("ls-c", "w")
          yield* relabel("ls-b", "x")
          yield* api.patch(R.ConfigMaps, ns, "ls-b", { type: "merge", body: { data: { k: "2" } } })
          const events = yield* api.watch(R.ConfigMaps, ns, { labelSelector: "contract=ls,app=x", resourceVersion: listed.resourceVersion }).pipe(
            Stream.filter((e) => e.type !== "BOOKMARK"),
            Stream.take(3),
            Stream.runCollect,
            Effect.timeout("20 seconds")
          )
          expect(
            Chunk.toArray(events).map((e) => `${e.type} ${e.object.metadata.name} app=${e.object.metadata.labels?.["app"]} k=${String((e.object["data"] as { k: string }).k)}`)
          ).toEqual(["DELETED ls-a app=x k=1", "ADDED ls-b app=x k=1", "MODIFIED ls-b app=x k=2"])
        })
      ))
  })
