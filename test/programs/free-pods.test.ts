import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { type Attachment, deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { memory } from "../../src/testing/layers.ts"
import { RESERVATION_CONCURRENCY } from "../../src/programs/executor.ts"
import { listRecheckThreshold, recheckByList } from "../../src/programs/recheck.ts"
import { freePod, freePods } from "../support/free-pods.ts"
import type { PodProjection } from "../../src/domain/pod.ts"
import { ApiHooks, memoryWithHooks } from "../support/hooks.ts"
import { InMemoryCluster } from "../../src/testing/InMemoryCluster.ts"
import { Caches } from "../../src/services/Caches.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { networkStatus, on, podObject } from "../support/objects.ts"
import { allocationsOf, cachesCaughtUp, createNad, eventsIn, podrefsOf, projectionOf, reservationNames } from "../support/world.ts"

/** Starts a pod, then deletes it without CNI DEL: the leak the controller exists for. */
const leak = (name: string, attachments: ReadonlyArray<Attachment>, namespace = "default") =>
  Effect.gen(function* () {
    const pod = yield* startPod(namespace, name, attachments)
    const projection = yield* projectionOf(namespace, name)
    yield* deletePod(pod)
    yield* cachesCaughtUp
    return { pod, projection }
  })

/** NAD default/net1 on `range` and `n` pods on it leaked (`p0` …), as their projections. */
const leakedOn = (range: string, n: number, prefix = "p") =>
  Effect.gen(function* () {
    yield* createNad("default", "net1", { range })
    const projections: Array<PodProjection> = []
    for (let i = 0; i < n; i++) projections.push((yield* leak(`${prefix}${i}`, [on("net1")])).projection)
    return projections
  })

const gcEvent = (name: string, ip: string, network: string) =>
  expect.objectContaining({
    type: "Normal",
    reason: "IPAddressGarbageCollected",
    message: `successful cleanup of IP address [${ip}] from network ${network}`,
    name,
    count: 1
  })

/** Pod default/p whose network-status lists `ip` on NAD `nad`, deleted, with the caches caught up. */
const deletedWithStatus = (nad: string, ip: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    yield* api.create(R.Pods, "default", podObject("default", "p", { status: networkStatus([{ name: nad, interface: "net1", ips: [ip] }]) }))
    const projection = yield* projectionOf("default", "p")
    yield* api.delete(R.Pods, "default", "p")
    yield* cachesCaughtUp
    return projection
  })

describe("freePods: upstream control-loop cases", () => {
  it.live("frees the deleted pod's IP and reservation, with upstream's exact Normal event", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.10.0.0/24" })
      const keep = yield* startPod("default", "keep", [on("net1")])
      const { projection } = yield* leak("gone", [on("net1")])
      expect(yield* podrefsOf("10.10.0.0-24")).toEqual(["default/gone", "default/keep"])
      const out = yield* freePod(projection)
      expect(out).toEqual({ _tag: "Freed", freed: [{ ip: "10.10.0.2", pool: "10.10.0.0-24", network: "net1" }], reservations: 1 })
      expect(yield* podrefsOf("10.10.0.0-24")).toEqual(["default/keep"])
      expect(yield* reservationNames).toEqual(["10.10.0.1"])
      expect(yield* eventsIn("default")).toEqual([gcEvent("gone", "10.10.0.2", "net1")])
      expect(keep.ips[0]!.ips).toEqual(["10.10.0.1"])
    }).pipe(Effect.provide(memory())))

  it.live("a NAD deleted first gets a Warning that says so, and the IPs are still freed", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.11.0.0/24" })
      const pod = yield* startPod("default", "p", [on("net1")])
      const projection = yield* projectionOf("default", "p")
      yield* Effect.flatMap(KubeApi, (api) => api.delete(R.NetworkAttachmentDefinitions, "default", "net1"))
      yield* deletePod(pod)
      yield* cachesCaughtUp
      const out = yield* freePod(projection)
      expect(out).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.11.0.1", pool: "10.11.0.0-24" }] })
      expect(yield* podrefsOf("10.11.0.0-24")).toEqual([])
      const events = yield* eventsIn("default")
      expect(events).toContainEqual(
        expect.objectContaining({
          type: "Warning",
          reason: "NetworkAttachmentDefinitionNotFound",
          message: "network-attachment-definition default/net1 not found; freeing the pod's addresses found by podref",
          name: "p",
          count: 1
        })
      )
      expect(events.filter((e) => e.reason === "IPAddressGarbageCollected")).toHaveLength(1)
    }).pipe(Effect.provide(memory())))

  it.live("a NAD deleted first and a reservation cache that has not seen the reservation yet: the pool found by podref still gets its reservation freed", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.14.0.0/24" })
      const pod = yield* startPod("default", "p", [on("net1")])
      const projection = yield* projectionOf("default", "p")
      yield* Effect.flatMap(KubeApi, (api) => api.delete(R.NetworkAttachmentDefinitions, "default", "net1"))
      yield* deletePod(pod)
      yield* cachesCaughtUp
      expect(yield* reservationNames).toEqual(["10.14.0.1"])
      // No NAD says how the pool names its reservations, and no cached reservation carries the podref: only its name finds it.
      const lagging = Effect.updateService(Caches, (c) => ({ ...c, reservations: { ...c.reservations, get: () => Option.none(), byIndex: () => [], values: () => [] } }))
      expect(yield* lagging(freePod(projection))).toEqual({ _tag: "Freed", freed: [{ ip: "10.14.0.1", pool: "10.14.0.0-24", network: "net1" }], reservations: 1 })
      expect(yield* reservationNames).toEqual([])
    }).pipe(Effect.provide(memory())))

  it.live("a deleted pod of a NAD that is gone and held nothing gets no Warning", () =>
    Effect.gen(function* () {
      const projection = yield* deletedWithStatus("default/long-gone", "10.13.0.5")
      expect(yield* freePod(projection)).toEqual({ _tag: "Freed", freed: [], reservations: 0 })
      expect(yield* eventsIn("default")).toEqual([])
    }).pipe(Effect.provide(memory())))

  it.live("a non-whereabouts NAD is skipped silently: no event, nothing touched", () =>
    Effect.gen(function* () {
      yield* createNad("default", "host", JSON.stringify({ cniVersion: "0.3.1", name: "host", type: "macvlan", ipam: { type: "host-local", subnet: "10.12.0.0/24" } }))
      const projection = yield* deletedWithStatus("default/host", "10.12.0.5")
      expect(yield* freePod(projection)).toEqual({ _tag: "Freed", freed: [], reservations: 0 })
      expect(yield* eventsIn("default")).toEqual([])
    }).pipe(Effect.provide(memory())))
})

describe("freePods: networks", () => {
  it.live("two interfaces on one NAD, dual-stack ipRanges and a named network are all freed", () =>
    Effect.gen(function* () {
      yield* createNad("default", "dual", { ipRanges: [{ range: "10.20.0.0/24" }, { range: "fd00:20::/120" }] })
      yield* createNad("default", "named", { range: "10.21.0.0/24", network_name: "blue" })
      const { projection } = yield* leak("multi", [on("dual", "net1"), on("dual", "net2"), on("named", "net3")])
      const out = yield* freePod(projection)
      expect(Either.right(out)).toEqual(
        Either.right({
          _tag: "Freed",
          freed: expect.arrayContaining([
            { ip: "10.20.0.1", pool: "10.20.0.0-24", network: "dual" },
            { ip: "10.20.0.2", pool: "10.20.0.0-24", network: "dual" },
            { ip: "fd00:20::1", pool: "fd00-20---120", network: "dual" },
            { ip: "fd00:20::2", pool: "fd00-20---120", network: "dual" },
            { ip: "10.21.0.1", pool: "blue-10.21.0.0-24", network: "named" }
          ]),
          reservations: 5
        })
      )
      if (out._tag === "Freed") expect(out.freed).toHaveLength(5)
      for (const pool of ["10.20.0.0-24", "fd00-20---120", "blue-10.21.0.0-24"]) expect(yield* podrefsOf(pool)).toEqual([])
      expect(yield* reservationNames).toEqual([])
      expect((yield* eventsIn("default")).map((e) => e.message)).toContain("successful cleanup of IP address [fd00:20::2] from network dual")
    }).pipe(Effect.provide(memory())))

  it.live("with enable_overlapping_ranges false no reservation exists or is looked for", () =>
    Effect.gen(function* () {
      yield* createNad("default", "noov", { range: "10.22.0.0/24", enable_overlapping_ranges: false })
      const { projection } = yield* leak("p", [on("noov")])
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      expect(yield* freePod(projection)).toMatchObject({ _tag: "Freed", reservations: 0 })
      expect(cluster.count({ resource: "overlappingrangeipreservations" })).toBe(0)
    }).pipe(Effect.provide(memory())))

  it.live("the default network is skipped; without network-status the networks annotation is used", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.23.0.0/24" })
      const { pod, projection } = yield* leak("p", [on("net1")])
      // The pod died before Multus wrote its status: only the request annotation is there.
      const bare = { ...projection, networkStatus: undefined }
      const out = yield* freePod(bare)
      expect(out).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.23.0.1", network: "net1" }] })
      expect(pod.ips).toHaveLength(1)
    }).pipe(Effect.provide(memory())))

  it.live("a pool the cache has not seen yet is read live", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.24.0.0/24" })
      yield* cachesCaughtUp
      const cluster = yield* InMemoryCluster
      // The pool informer's watch goes deaf: the allocation below never reaches the cache.
      cluster.injectFault({ verb: "watch", resource: "ippools", reason: "stall" })
      cluster.closeWatches()
      const api = yield* KubeApi
      yield* api.create(R.IPPools, "kube-system", {
        metadata: { name: "10.24.0.0-24" },
        spec: { range: "10.24.0.0/24", allocations: { "1": { id: "c", podref: "default/p", ifname: "net1" } } }
      })
      const projection = { namespace: "default", name: "p", uid: "u1", networkStatus: networkStatus([{ name: "default/net1", interface: "net1", ips: ["10.24.0.1"] }]) }
      cluster.resetCalls()
      const out = yield* freePod(projection)
      expect(out).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.24.0.1" }] })
      expect(cluster.count({ verb: "get", resource: "ippools", name: "10.24.0.0-24" })).toBe(1)
    }).pipe(Effect.provide(memory())))
})

describe("freePods: never free what a live pod holds", () => {
  it.live("a pod reborn under the same name keeps its IP; freed once it is gone for good", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.30.0.0/24" })
      const { projection: first } = yield* leak("web-0", [on("net1")])
      // The StatefulSet recreates web-0; whereabouts hands it the same IP (same podref + ifname).
      const reborn = yield* startPod("default", "web-0", [on("net1")])
      expect(reborn.ips[0]!.ips).toEqual(["10.30.0.1"])
      yield* cachesCaughtUp
      const kept = yield* freePod(first)
      expect(kept._tag).toBe("Kept")
      expect(yield* podrefsOf("10.30.0.0-24")).toEqual(["default/web-0"])
      expect(yield* eventsIn("default")).toEqual([])
      const second = yield* projectionOf("default", "web-0")
      yield* deletePod(reborn)
      yield* cachesCaughtUp
      expect(yield* freePod(second)).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.30.0.1" }] })
      expect(yield* podrefsOf("10.30.0.0-24")).toEqual([])
    }).pipe(Effect.provide(memory())))

  it.live("a terminating pod of the same name also keeps it (its containers may still run)", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.31.0.0/24" })
      const { projection } = yield* leak("db-0", [on("net1")])
      yield* startPod("default", "db-0", [on("net1")])
      const api = yield* KubeApi
      yield* api.delete(R.Pods, "default", "db-0", { gracePeriodSeconds: 30 })
      yield* cachesCaughtUp
      expect((yield* freePod(projection))._tag).toBe("Kept")
      expect(yield* podrefsOf("10.31.0.0-24")).toEqual(["default/db-0"])
    }).pipe(Effect.provide(memory())))
})

describe("freePods: bad input", () => {
  it.live("a malformed network-status never blocks freeing: the podref index finds the addresses, and one Warning line says what was wrong and what was freed", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.40.0.0/24" })
      const { projection } = yield* leak("p", [on("net1"), on("net1", "net2")])
      const out = yield* freePod({ ...projection, networkStatus: "[{not json" })
      expect(out).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.40.0.1" }, { ip: "10.40.0.2" }], reservations: 2 })
      expect(yield* podrefsOf("10.40.0.0-24")).toEqual([])
      expect(yield* reservationNames).toEqual([])
      const warning = (yield* eventsIn("default")).find((e) => e.type === "Warning")
      expect(warning).toMatchObject({
        type: "Warning",
        reason: "InvalidNetworkAnnotation",
        name: "p",
        count: 1,
        message: "cannot read k8s.v1.cni.cncf.io/network-status: not valid JSON (Expected property name or '}' in JSON at position 2 (line 1 column 3)); freed its 2 addresses found by podref"
      })
      expect(warning!.message).not.toContain("\n")
    }).pipe(Effect.provide(memory())))

  it.live("a broken NAD config blocks nothing: its pod's addresses are freed through the podref index, with a one-line Warning naming the NAD", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.41.0.0/24" })
      const { projection } = yield* leak("p", [on("net1")])
      const api = yield* KubeApi
      yield* api.patch(R.NetworkAttachmentDefinitions, "default", "net1", { type: "merge", body: { spec: { config: "{\"ipam\": {\"type\": \"whereabouts\", \"range\": \"10.41.0.0/33\"}}" } } })
      yield* cachesCaughtUp
      expect(yield* freePod(projection)).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.41.0.1" }] })
      expect(yield* podrefsOf("10.41.0.0-24")).toEqual([])
      const warning = (yield* eventsIn("default")).find((e) => e.type === "Warning")
      expect(warning).toMatchObject({ reason: "InvalidIPAMConfig", name: "p" })
      expect(warning!.message).toBe('cannot read network-attachment-definition default/net1: invalid CIDR "10.41.0.0/33"; freed its 1 address found by podref')
    }).pipe(Effect.provide(memory())))

  it.live("a non-whereabouts NAD with an empty config beside a good one blocks nothing and is not reported", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.42.0.0/24" })
      yield* createNad("default", "ondisk", "")
      yield* createNad("default", "host", JSON.stringify({ cniVersion: "0.3.1", name: "host", type: "macvlan", ipam: { type: "host-local", subnet: "10.99.0.0/24" } }))
      yield* cachesCaughtUp
      const { projection } = yield* leak("p", [on("net1")])
      // The pod is also on a NAD whose config lives on the nodes and on one with another IPAM.
      const status = JSON.parse(projection.networkStatus!) as Array<Record<string, unknown>>
      const networkStatus = JSON.stringify([...status, { name: "default/ondisk", interface: "eth9", ips: ["192.0.2.9"] }, { name: "default/host", interface: "eth8", ips: ["10.99.0.2"] }])
      expect(yield* freePod({ ...projection, networkStatus })).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.42.0.1" }] })
      expect((yield* eventsIn("default")).filter((e) => e.type === "Warning")).toEqual([])
    }).pipe(Effect.provide(memory())))
})

describe("freePods: batching", () => {
  it.live("N dead pods in one pool are freed with one pool write", () =>
    Effect.gen(function* () {
      const projections = yield* leakedOn("10.50.0.0/16", 40)
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      const results = yield* freePods(projections)
      expect(results.every((r) => r.outcome._tag === "Freed" && r.outcome.freed.length === 1)).toBe(true)
      expect(cluster.count({ verb: "patch", resource: "ippools" })).toBe(1)
      expect(cluster.count({ verb: "get", resource: "ippools" })).toBe(0)
      expect(cluster.count({ verb: "list", resource: "pods" })).toBe(1)
      expect(Object.keys(yield* allocationsOf("10.50.0.0-16"))).toEqual([])
    }).pipe(Effect.provide(memory())))

  it("the re-check lists a namespace only above a batch size set by the client's QPS (8 to 32; 32 without a cap)", () => {
    expect([1, 20, 128, 160, 500, 5_000, 0].map(listRecheckThreshold)).toEqual([8, 8, 8, 10, 31, 32, 32])
  })

  it.live("at QPS 500 a batch of 20 re-checks with 20 metadata-only GETs; a batch of 40 with one LIST", () =>
    Effect.gen(function* () {
      const projections = yield* leakedOn("10.56.0.0/16", 60)
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      yield* freePods(projections.slice(0, 20))
      expect([cluster.count({ verb: "get", resource: "pods" }), cluster.count({ verb: "list", resource: "pods" })]).toEqual([20, 0])
      cluster.resetCalls()
      yield* freePods(projections.slice(20))
      expect([cluster.count({ verb: "get", resource: "pods" }), cluster.count({ verb: "list", resource: "pods" })]).toEqual([0, 1])
      expect(Object.keys(yield* allocationsOf("10.56.0.0-16"))).toEqual([])
    }).pipe(Effect.provide(memory({ apiQps: 500 }))))

  it.live("a LIST re-check (names only) still sees a pod reborn under a deleted pod's name: its addresses stay, the rest go", () =>
    Effect.gen(function* () {
      const projections = yield* leakedOn("10.58.0.0/16", 40)
      const api = yield* KubeApi
      yield* api.create(R.Pods, "default", podObject("default", "p7", {}))
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      const results = yield* freePods(projections)
      expect([cluster.count({ verb: "get", resource: "pods" }), cluster.count({ verb: "list", resource: "pods" })]).toEqual([0, 1])
      expect(results[7]!.outcome).toEqual({ _tag: "Kept", why: "pod default/p7 exists again and holds these addresses" })
      expect(results.filter((r) => r.outcome._tag === "Freed")).toHaveLength(39)
      expect(Object.values(yield* allocationsOf("10.58.0.0-16")).map((a) => a.podref)).toEqual(["default/p7"])
    }).pipe(Effect.provide(memory({ apiQps: 500 }))))

  it("above that size, it lists only a namespace small for the batch (16 pods per re-checked pod), or when GETs would take over 2 s of the budget", () => {
    // QPS 20: threshold 8, two seconds of budget = 40 GETs.
    expect(recheckByList(8, 0, 20)).toBe(false)
    expect(recheckByList(9, 144, 20)).toBe(true)
    expect(recheckByList(9, 145, 20)).toBe(false)
    expect(recheckByList(40, 10_000, 20)).toBe(false)
    expect(recheckByList(41, 10_000, 20)).toBe(true)
    // QPS 500: threshold 31, a 1,000-pod namespace is listed for 63 pods and more.
    expect([recheckByList(62, 1_000, 500), recheckByList(63, 1_000, 500)]).toEqual([false, true])
    // No cap (the default): threshold 32; only the namespace's size decides.
    expect([recheckByList(32, 0, 0), recheckByList(33, 528, 0), recheckByList(33, 529, 0), recheckByList(5_000, 100_000, 0)]).toEqual([false, true, false, false])
  })

  it.live("a batch of 12 dead pods in a namespace of 300 live ones re-checks with 12 GETs, not a LIST of the 300", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      for (let i = 0; i < 300; i++) yield* api.create(R.Pods, "default", podObject("default", `live${i}`, {}))
      const projections = yield* leakedOn("10.57.0.0/16", 12)
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      yield* freePods(projections)
      expect([cluster.count({ verb: "get", resource: "pods" }), cluster.count({ verb: "list", resource: "pods" })]).toEqual([12, 0])
      expect(Object.keys(yield* allocationsOf("10.57.0.0-16"))).toEqual([])
    }).pipe(Effect.provide(memory())))

  it.live("an ordinary deletion (CNI DEL already freed everything) costs no API call", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.52.0.0/24" })
      const pod = yield* startPod("default", "p", [on("net1")])
      const projection = yield* projectionOf("default", "p")
      yield* deletePod(pod, { cniDel: true })
      yield* cachesCaughtUp
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      expect(yield* freePod(projection)).toEqual({ _tag: "Freed", freed: [], reservations: 0 })
      expect(cluster.calls).toEqual([])
    }).pipe(Effect.provide(memory())))

  it.live("an isolated single-interface pod costs one pod GET, one pool patch, one reservation delete", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.51.0.0/24" })
      const { projection } = yield* leak("p", [on("net1")])
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      yield* freePod(projection)
      const calls = cluster.calls.filter((c) => c.resource !== "events").map((c) => `${c.verb} ${c.resource}`)
      expect(calls.sort()).toEqual(["delete overlappingrangeipreservations", "get pods", "patch ippools"])
    }).pipe(Effect.provide(memory())))
})

describe("freePods: reservations before the pool entries they guard", () => {
  it.live("a single pod's reservation is deleted before its pool patch", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.53.0.0/24" })
      const { projection } = yield* leak("p", [on("net1")])
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      expect(yield* freePod(projection)).toEqual({ _tag: "Freed", freed: [{ ip: "10.53.0.1", pool: "10.53.0.0-24", network: "net1" }], reservations: 1 })
      const writes = cluster.calls.filter((c) => c.verb === "delete" || c.verb === "patch").map((c) => `${c.verb} ${c.resource}`)
      expect(writes).toEqual(["delete overlappingrangeipreservations", "patch ippools"])
      expect(yield* reservationNames).toEqual([])
    }).pipe(Effect.provide(memory())))

  it.live(`a batch with more than ${RESERVATION_CONCURRENCY} reservations deletes every one before its pool patch`, () =>
    Effect.gen(function* () {
      const projections = yield* leakedOn("10.54.0.0/24", RESERVATION_CONCURRENCY + 1, "p-")
      const cluster = yield* InMemoryCluster
      cluster.resetCalls()
      const results = yield* freePods(projections)
      expect(results.every((r) => r.outcome._tag === "Freed" && r.outcome.freed.length === 1)).toBe(true)
      const writes = cluster.calls.filter((c) => c.verb === "delete" || c.verb === "patch").map((c) => `${c.verb} ${c.resource}`)
      expect(writes).toEqual([...Array.from({ length: RESERVATION_CONCURRENCY + 1 }, () => "delete overlappingrangeipreservations"), "patch ippools"])
      expect(yield* podrefsOf("10.54.0.0-24")).toEqual([])
      expect(yield* reservationNames).toEqual([])
    }).pipe(Effect.provide(memory())))

  it.live("a failed reservation delete frees nothing and leaves the pod to retry; the retry frees it once", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.55.0.0/24" })
      const { projection } = yield* leak("p", [on("net1")])
      const cluster = yield* InMemoryCluster
      cluster.injectFault({ verb: "delete", resource: "overlappingrangeipreservations" })
      const first = yield* Effect.either(freePod(projection))
      expect(Either.isLeft(first) && first.left).toMatchObject({ reason: "ApiError", retryable: true })
      expect(yield* podrefsOf("10.55.0.0-24")).toEqual(["default/p"])
      expect(yield* reservationNames).toEqual(["10.55.0.1"])
      expect(yield* eventsIn("default")).toEqual([])
      yield* cachesCaughtUp
      expect(yield* freePod(projection)).toEqual({ _tag: "Freed", freed: [{ ip: "10.55.0.1", pool: "10.55.0.0-24", network: "net1" }], reservations: 1 })
      expect(yield* podrefsOf("10.55.0.0-24")).toEqual([])
      expect(yield* reservationNames).toEqual([])
      expect(yield* eventsIn("default")).toEqual([gcEvent("p", "10.55.0.1", "net1")])
    }).pipe(Effect.provide(memory())))

  it.live("a pool patch that fails after the reservations went: the pod is retried, and what another pool freed is reported now", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.56.0.0/24" })
      yield* createNad("default", "net2", { range: "10.57.0.0/24" })
      const { projection } = yield* leak("p", [on("net1"), on("net2", "net2")])
      const cluster = yield* InMemoryCluster
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<InMemoryCluster>()
      hooks.before = (c) =>
        c.verb === "patch" && c.name === "10.57.0.0-24" ? Effect.sync(() => cluster.injectFault({ verb: "patch", resource: "ippools" })).pipe(Effect.provide(env)) : Effect.void
      const results = yield* freePods([projection])
      hooks.clear()
      expect(results[0]!.outcome).toMatchObject({
        _tag: "PartlyFreed",
        freed: [{ ip: "10.56.0.1", pool: "10.56.0.0-24", network: "net1" }],
        error: { reason: "ApiError", retryable: true }
      })
      expect(yield* podrefsOf("10.56.0.0-24")).toEqual([])
      expect(yield* podrefsOf("10.57.0.0-24")).toEqual(["default/p"])
      yield* cachesCaughtUp
      expect(yield* freePod(projection)).toMatchObject({ _tag: "Freed", freed: [{ ip: "10.57.0.1" }] })
      expect(yield* podrefsOf("10.57.0.0-24")).toEqual([])
    }).pipe(Effect.provide(memoryWithHooks())))
})
