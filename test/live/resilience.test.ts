/**
 * The controller process when the world misbehaves, against a real kube-apiserver + etcd:
 * (a) the API server restarts mid-run; (b) its watch history is compacted away while pods are
 * deleted behind its back, forcing a relist; (c) two replicas, the leader SIGKILLed; (d) an
 * allocator writing the same pools while 500 pods are deleted; (e) malformed objects.
 * Everything is asserted on what the API server holds afterwards, and on the processes.
 */
import { afterEach, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { podAttachments, projectPod } from "../../src/domain/pod.ts"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { NETWORK_STATUS_ANNOTATION } from "../../src/domain/multus.ts"
import { type RunningPod, deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { nadObject, podObject, poolObject } from "../support/objects.ts"
import { describeLive, runningEnvtest, startApiServer, stopApiServer, uniqueNamespace } from "../support/live.ts"
import { CLEAN, type Net, poolOf, restReport, seedRunningPods } from "./support/bulk.ts"
import { stopAllControllers } from "./support/controller-process.ts"
import { awaitLeading, awaitMetric, launch, logsWith, metricOf } from "./support/controller.ts"
import { compactAll, deleteKey, etcdEndpoint, podKey } from "./support/etcd.ts"
import {
  type LiveWorld,
  createNad,
  ensureNamespace,
  eventsIn,
  gcMessage,
  leaseHolder,
  liveWorld,
  on,
  poolView,
  reservationView,
  waitForValue,
  waitUntil
} from "./support/world.ts"

const GC = "IPAddressGarbageCollected"
const ref = (p: { readonly namespace: string; readonly name: string }) => `${p.namespace}/${p.name}`
const ipOf = (p: RunningPod) => p.ips[0]!.ips[0]!
const reservationsLike = (prefix: string) =>
  Effect.map(reservationView, (all) => Object.fromEntries(Object.entries(all).filter(([name]) => name.startsWith(prefix))))
/** `ip → podref` for these running pods, sorted like poolView. */
const held = (pods: ReadonlyArray<RunningPod>) =>
  Object.fromEntries(pods.map((p) => [ipOf(p), ref(p)] as const).sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true })))
const gcEvents = (ns: string) =>
  Effect.map(eventsIn(ns), (es) => es.filter((e) => e.reason === GC).map((e) => ({ name: e.name, uid: e.uid, message: e.message, by: e.reportingInstance })).sort((a, b) => a.name.localeCompare(b.name)))

/** What a standby waits for a SIGKILLed leader's Lease: client-go's 15 s lease, then its next jittered attempt (at most 4.4 s), and slack. */
const TAKEOVER = "40 seconds"

describeLive("resilience of the controller process against a real API server", () => {
  const world = (pools: string) => <A, E>(body: Effect.Effect<A, E, LiveWorld>) => body.pipe(Effect.provide(liveWorld(pools)))
  afterEach(() => stopAllControllers(), 60_000)

  it.live("(a) kube-apiserver restart mid-run: the watches resume, deletions after the restart are freed, nothing is missed or freed twice", () => {
    const pools = uniqueNamespace("res-a")
    return world(pools)(
      Effect.gen(function* () {
        const ns = `${pools}-pods`
        yield* ensureNamespace(pools)
        yield* ensureNamespace(ns)
        yield* createNad(ns, "r", { range: "10.250.0.0/24" })
        const pods: Array<RunningPod> = []
        for (let i = 0; i < 6; i++) pods.push(yield* startPod(ns, `r${i}`, [on(`${ns}/r`)]))
        // No leader election: a restart that outlasts client-go's 10 s renew deadline (a loaded
        // machine) would hand leadership over and sweep again, and this test is about the watches.
        const ctl = yield* launch({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: pools, identity: "res-a", args: ["--no-leader-elect"] })
        yield* awaitLeading(ctl)
        yield* deletePod(pods[0]!)
        yield* waitForValue("r0 freed before the restart", poolView("10.250.0.0-24"), held(pods.slice(1)))

        const watchesBefore = (yield* metricOf(ctl, "whereabouts_controller_api_requests_total", { verb: "watch", resource: "pods", code: "200" })) ?? 0
        yield* Effect.promise(stopApiServer)
        expect(ctl.running()).toBe(true)
        yield* Effect.promise(startApiServer)
        for (const p of pods.slice(1, 4)) yield* deletePod(p)

        yield* waitForValue("r1..r3 freed after the restart", poolView("10.250.0.0-24"), held(pods.slice(4)), { context: () => ctl.tail() })
        yield* waitForValue("their reservations too", reservationsLike("10.250."), held(pods.slice(4)))
        yield* waitForValue(
          "one event per freed address, each with its pod's uid",
          gcEvents(ns),
          pods.slice(0, 4).map((p) => ({ name: p.name, uid: p.uid, message: gcMessage(ipOf(p), "r"), by: "res-a" }))
        )
        // The deletion path freed them all (the informers resumed), not a second sweep.
        yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "deletion" }, (v) => v === 4)
        yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "sweep" }, (v) => v === 0)
        expect(yield* metricOf(ctl, "whereabouts_controller_api_requests_total", { verb: "watch", resource: "pods", code: "200" })).toBeGreaterThan(watchesBefore)
        expect(yield* Effect.promise(() => ctl.probe("/healthz"))).toBe(200)
        expect(yield* Effect.promise(() => ctl.probe("/readyz"))).toBe(200)
        expect(yield* Effect.promise(() => ctl.stop())).toEqual({ code: 0, signal: null })
      })
    )
  }, 120_000)

  it.live("(b) pods deleted in etcd while the API server is down, history compacted: the informer's relist discovers the deletions and the deletion path frees them", () => {
    const pools = uniqueNamespace("res-b")
    return world(pools)(
      Effect.gen(function* () {
        const ns = `${pools}-pods`
        yield* ensureNamespace(pools)
        yield* ensureNamespace(ns)
        yield* createNad(ns, "q", { range: "10.251.0.0/24" })
        const pods: Array<RunningPod> = []
        for (let i = 0; i < 6; i++) pods.push(yield* startPod(ns, `q${i}`, [on(`${ns}/q`)]))
        // No leader election: the start-up sweep runs once, before anything is deleted.
        const ctl = yield* launch({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: pools, identity: "res-b", args: ["--no-leader-elect"] })
        yield* awaitLeading(ctl)
        const gone = [pods[1]!, pods[3]!, pods[5]!]

        const podLists = (yield* metricOf(ctl, "whereabouts_controller_api_requests_total", { verb: "list", resource: "pods", code: "200" })) ?? 0
        const etcd = etcdEndpoint(runningEnvtest().kubeconfigPath)
        yield* Effect.promise(stopApiServer)
        for (const p of gone) expect(yield* Effect.promise(() => deleteKey(etcd, podKey(p.namespace, p.name)))).toBe(1)
        // No watch can resume from any version the controller has seen: it must relist.
        yield* Effect.promise(() => compactAll(etcd))
        yield* Effect.promise(startApiServer)

        const kept = [pods[0]!, pods[2]!, pods[4]!]
        yield* waitForValue("q1, q3, q5 freed", poolView("10.251.0.0-24"), held(kept), { context: () => ctl.tail() })
        yield* waitForValue("their reservations too", reservationsLike("10.251."), held(kept))
        // Events with the pods' uids: the informer turned the relist's missing pods into deletions
        // (a sweep knows no uid of a pod that is gone).
        yield* waitForValue(
          "one event per address",
          gcEvents(ns),
          gone.map((p) => ({ name: p.name, uid: p.uid, message: gcMessage(ipOf(p), "q"), by: "res-b" }))
        )
        yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "deletion" }, (v) => v === 3)
        // How the informer learnt it: its watch was refused as too old (410), and it listed again.
        expect(yield* metricOf(ctl, "whereabouts_controller_api_requests_total", { verb: "watch", resource: "pods", code: "410" })).toBeGreaterThanOrEqual(1)
        expect(yield* metricOf(ctl, "whereabouts_controller_api_requests_total", { verb: "list", resource: "pods", code: "200" })).toBeGreaterThan(podLists)
        // The relist after the gap is followed by a sweep (for pods the gap hid entirely, see
        // test/programs/regressions/relist-gap.test.ts); here the deletion path had freed everything first.
        yield* awaitMetric(ctl, "whereabouts_controller_sweeps_total", { result: "success" }, (v) => v === 2)
        yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "sweep" }, (v) => v === 0)
        expect(logsWith(ctl, "pods were listed again after a gap in their watch: sweeping for pods the gap hid")).toHaveLength(1)
        expect(yield* Effect.promise(() => ctl.stop())).toEqual({ code: 0, signal: null })
      })
    )
  }, 120_000)

  it.live("(c) two replicas: exactly one holds the Lease; SIGKILL the leader and the other takes over, sweeps what was deleted in between, then frees deletions", () => {
    const pools = uniqueNamespace("res-c")
    return world(pools)(
      Effect.gen(function* () {
        const ns = `${pools}-pods`
        yield* ensureNamespace(pools)
        yield* ensureNamespace(ns)
        yield* createNad(ns, "ha", { range: "10.252.0.0/24" })
        const pods: Array<RunningPod> = []
        for (let i = 0; i < 4; i++) pods.push(yield* startPod(ns, `h${i}`, [on(`${ns}/ha`)]))
        const kubeconfig = runningEnvtest().kubeconfigPath
        const a = yield* launch({ kubeconfig, namespace: pools, identity: "ha-a" })
        const b = yield* launch({ kubeconfig, namespace: pools, identity: "ha-b" })
        const leaders = Effect.gen(function* () {
          return {
            holder: yield* leaseHolder(pools),
            a: yield* metricOf(a, "whereabouts_controller_leader"),
            b: yield* metricOf(b, "whereabouts_controller_leader"),
            ready: [yield* Effect.promise(() => a.probe("/readyz")), yield* Effect.promise(() => b.probe("/readyz"))]
          }
        })
        const settled = yield* waitUntil(
          "exactly one replica leads, both ready",
          leaders,
          (s) => s.ready.every((r) => r === 200) && ((s.holder === "ha-a" && s.a === 1 && s.b === 0) || (s.holder === "ha-b" && s.b === 1 && s.a === 0)),
          { context: () => `${a.tail(10)}\n${b.tail(10)}` }
        )
        const [leader, standby] = settled.holder === "ha-a" ? [a, b] : [b, a]
        yield* awaitLeading(leader)

        yield* deletePod(pods[0]!)
        yield* waitForValue("the leader frees h0", poolView("10.252.0.0-24"), held(pods.slice(1)))
        expect((yield* gcEvents(ns)).map((e) => e.by)).toEqual([leader.identity])
        expect(yield* metricOf(standby, "whereabouts_controller_ips_freed_total", { trigger: "deletion" })).toBe(0)

        expect(yield* Effect.promise(() => leader.kill())).toEqual({ code: null, signal: "SIGKILL" })
        // Deleted while nobody leads: the standby's start-up sweep must free it.
        yield* deletePod(pods[1]!)
        yield* waitUntil("the standby takes the Lease over", leaders, (s) => s.holder === standby.identity && (standby === a ? s.a : s.b) === 1, {
          context: () => standby.tail(10),
          timeout: TAKEOVER
        })
        yield* awaitLeading(standby)
        yield* waitForValue("h1 freed by the new leader's sweep", poolView("10.252.0.0-24"), held(pods.slice(2)))
        yield* deletePod(pods[2]!)
        yield* waitForValue("h2 freed by its deletion loop", poolView("10.252.0.0-24"), held(pods.slice(3)))
        yield* waitForValue("the events say who freed what", gcEvents(ns), [
          { name: "h0", uid: pods[0]!.uid, message: gcMessage(ipOf(pods[0]!), "ha"), by: leader.identity },
          { name: "h1", uid: "", message: gcMessage(ipOf(pods[1]!), "ha"), by: standby.identity },
          { name: "h2", uid: pods[2]!.uid, message: gcMessage(ipOf(pods[2]!), "ha"), by: standby.identity }
        ])
        yield* awaitMetric(standby, "whereabouts_controller_ips_freed_total", { trigger: "sweep" }, (v) => v === 1)
        yield* awaitMetric(standby, "whereabouts_controller_ips_freed_total", { trigger: "deletion" }, (v) => v === 1)
        expect(yield* reservationsLike("10.252.")).toEqual(held(pods.slice(3)))
      })
    )
  }, 120_000)

  it.live("(d) at the shipped defaults (no client-side cap), an allocator writing the same pools while 500 pods are deleted: no request answered 429; at rest no live pod lost its address, every dead pod's is freed, none is held twice", () => {
    const pools = uniqueNamespace("res-d")
    return world(pools)(
      Effect.gen(function* () {
        const ns = `${pools}-pods`
        yield* ensureNamespace(pools)
        yield* ensureNamespace(ns)
        const nets: ReadonlyArray<Net> = [
          { nad: "bulk-a", range: "10.253.0.0/22" },
          { nad: "bulk-b", range: "10.254.0.0/22" }
        ]
        for (const n of nets) yield* createNad(ns, n.nad, { range: n.range })
        const seeded = yield* seedRunningPods(ns, "s", nets, 600)
        const doomed = seeded.filter((_, i) => i % 6 !== 0) // 500 die, 100 live on
        expect(doomed).toHaveLength(500)
        expect(yield* restReport(ns, nets.map(poolOf))).toMatchObject({ ...CLEAN, livePods: 600, allocations: 600 })

        const ctl = yield* launch({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: pools, identity: "res-d" })
        yield* awaitLeading(ctl)
        const api = yield* KubeApi
        let deleting = true
        const freedSoFar = Effect.map(metricOf(ctl, "whereabouts_controller_ips_freed_total", { trigger: "deletion" }), (n) => n ?? 0)
        const allocator = Effect.gen(function* () {
          const started: Array<RunningPod> = []
          // The CNI plugin keeps allocating from the same two pools for as long as the controller is
          // freeing (bounded, should it stall): new pods take freed addresses while others are freed.
          for (let i = 0; i < 400 && (deleting || (yield* freedSoFar) < 500); i++) started.push(yield* startPod(ns, `n-${i}`, [on(`${ns}/${nets[i % 2]!.nad}`)]))
          return started
        })
        const deleter = Effect.forEach(doomed, (p) => api.delete(R.Pods, ns, p.name, { gracePeriodSeconds: 0 }), { concurrency: 16, discard: true }).pipe(
          Effect.ensuring(Effect.sync(() => (deleting = false)))
        )
        const [started] = yield* Effect.all([allocator, deleter], { concurrency: 2 })
        const doomedIPs = new Set(doomed.map((p) => p.ip))
        const reused = started.filter((p) => doomedIPs.has(ipOf(p))).length
        console.info(`(d) the allocator started ${started.length} pods during the deletions, ${reused} of them on addresses freed from dead pods`)
        expect(reused).toBeGreaterThan(0)

        const report = yield* waitUntil(
          "every dead pod's address freed",
          restReport(ns, nets.map(poolOf)),
          (r) => r.deadHeld.length === 0 && r.reservationDead.length === 0,
          { timeout: "90 seconds", interval: "1 second", context: () => ctl.tail(20) }
        )
        expect(report).toMatchObject({ ...CLEAN, livePods: 100 + started.length, allocations: 100 + started.length })
        // Each dead pod's address freed exactly once; none of the allocator's pods lost theirs.
        // The Events follow the pool writes, through their own queue.
        const events = yield* waitUntil(
          "500 events",
          Effect.map(eventsIn(ns), (es) => es.filter((e) => e.reason === GC)),
          (es) => es.length >= 500,
          { timeout: "60 seconds", interval: "1 second", context: () => ctl.tail(20) }
        )
        expect(events).toHaveLength(500)
        expect(new Set(events.map((e) => e.name))).toEqual(new Set(doomed.map((p) => p.name)))
        yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "deletion" }, (v) => v === 500)
        expect(yield* metricOf(ctl, "whereabouts_controller_failures_total")).toBe(0)
        // The API server's default APF configuration never had to push back.
        expect(yield* metricOf(ctl, "whereabouts_controller_api_requests_total")).toBeGreaterThan(0)
        expect(yield* metricOf(ctl, "whereabouts_controller_api_requests_total", { code: "429" })).toBeUndefined()
        expect(yield* metricOf(ctl, "whereabouts_controller_api_pauses_total")).toBe(0)
        expect(ctl.running()).toBe(true)
      })
    )
  }, 240_000)

  it.live("(e) malformed objects: one-line Warning events, bad input blocks no freeing, nothing wrongly freed, the controller keeps running and still frees a normal deletion", () => {
    const pools = uniqueNamespace("res-e")
    return world(pools)(
      Effect.gen(function* () {
        const ns = `${pools}-pods`
        yield* ensureNamespace(pools)
        yield* ensureNamespace(ns)
        const api = yield* KubeApi
        yield* createNad(ns, "good", { range: "10.255.0.0/24" })
        yield* createNad(ns, "flaky", { range: "10.255.1.0/24" })
        const live = yield* startPod(ns, "m-live", [on(`${ns}/good`)])
        const badStatus = yield* startPod(ns, "m-badstatus", [on(`${ns}/good`)])
        const badNad = yield* startPod(ns, "m-badnad", [on(`${ns}/flaky`)])
        const normal = yield* startPod(ns, "m-normal", [on(`${ns}/good`)])
        expect([live, badStatus, normal].map(ipOf)).toEqual(["10.255.0.1", "10.255.0.2", "10.255.0.3"])

        // A network-status that is not JSON; a `networks` request that is not either (and no status).
        yield* api.patch(R.Pods, ns, "m-badstatus", { type: "merge", body: { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: "[{not json" } } } })
        yield* api.create(R.Pods, ns, podObject(ns, "m-badrequest", { networks: "[{\"name\": ", nodeName: "node-1" }))
        // The NAD's config broken after m-badnad got its address.
        const flaky = yield* api.get(R.NetworkAttachmentDefinitions, ns, "flaky")
        yield* api.replace(R.NetworkAttachmentDefinitions, ns, { ...nadObject(ns, "flaky", "{\"cniVersion\": \"0.3.1\", \"ipam\": {"), metadata: flaky.metadata })

        // The CRD's schema keeps an allocation's required fields, but not what an offset looks like.
        const poolNs = pools
        const invalid = yield* Effect.flip(api.create(R.IPPools, poolNs, poolObject(poolNs, "bad-1", "10.9.0.0/24", { "1": { id: "c" } as never })))
        expect(invalid).toMatchObject({ reason: "Invalid", status: 422 })
        expect(invalid.detail).toContain("spec.allocations.1.podref: Required value")
        const wrongType = yield* Effect.flip(api.create(R.IPPools, poolNs, poolObject(poolNs, "bad-2", "10.9.0.0/24", { "1": { id: 7, podref: "a/b" } as never })))
        expect(wrongType).toMatchObject({ reason: "Invalid", status: 422 })
        // Junk offsets are stored as they are: "abc" and "-1" next to real entries, one of them an orphan.
        const pool = yield* api.get(R.IPPools, poolNs, "10.255.0.0-24")
        const allocations = (pool["spec"] as { allocations: Record<string, unknown> }).allocations
        const junk = {
          abc: { id: "junk-1", podref: `${ns}/ghost-abc`, ifname: "net1" },
          "-1": { id: "junk-2", podref: `${ns}/ghost-neg`, ifname: "net1" },
          "9": { id: "orphan", podref: `${ns}/ghost`, ifname: "net1" }
        }
        yield* api.replace(R.IPPools, poolNs, { ...pool, spec: { ...(pool["spec"] as object), allocations: { ...allocations, ...junk } } })
        const stored = yield* api.get(R.IPPools, poolNs, "10.255.0.0-24")
        expect(Object.keys((stored["spec"] as { allocations: object }).allocations).sort()).toEqual(["-1", "1", "2", "3", "9", "abc"])

        // Started only now, so its caches and its start-up sweep see all of the above.
        const ctl = yield* launch({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: poolNs, identity: "res-e" })
        yield* awaitLeading(ctl)
        // The sweep skipped the junk with a warning each, and still freed the real orphan.
        expect(logsWith(ctl, "pool has an unreadable allocation; left as is").map((l) => l.annotations["key"]).sort()).toEqual(["-1", "abc"])
        yield* waitUntil("the orphan at offset 9 is freed", poolView("10.255.0.0-24"), (v) => v["10.255.0.9"] === undefined)

        const projections = {
          badStatus: projectPod(yield* api.get(R.Pods, ns, "m-badstatus")),
          badRequest: projectPod(yield* api.get(R.Pods, ns, "m-badrequest"))
        }
        yield* deletePod(badStatus)
        yield* deletePod(badNad)
        yield* api.delete(R.Pods, ns, "m-badrequest", { gracePeriodSeconds: 0 })

        const annotationWarning = (p: typeof projections.badStatus, despite: string) => {
          const decoded = podAttachments(p)
          if (Either.isRight(decoded)) throw new Error("expected a broken annotation")
          return `cannot read ${decoded.left.annotation}: ${decoded.left.message}; ${despite}`
        }
        const nadError = decodeNadConfig("{\"cniVersion\": \"0.3.1\", \"ipam\": {")
        if (Either.isRight(nadError)) throw new Error("expected a broken NAD config")
        const expected = [
          `Warning InvalidIPAMConfig m-badnad: cannot read network-attachment-definition ${ns}/flaky: ${nadError.left.message}; freed its 1 address found by podref`,
          `Warning InvalidNetworkAnnotation m-badrequest: ${annotationWarning(projections.badRequest, "no address of it found by podref")}`,
          `Warning InvalidNetworkAnnotation m-badstatus: ${annotationWarning(projections.badStatus, "freed its 1 address found by podref")}`
        ]
        const warnings = (yield* eventsIn(ns)).filter((e) => e.type === "Warning")
        yield* waitForValue(
          "three Warnings, exact",
          Effect.map(eventsIn(ns), (es) => es.filter((e) => e.type === "Warning").map((e) => `${e.type} ${e.reason} ${e.name}: ${e.message}`).sort()),
          expected,
          { context: () => `${JSON.stringify(warnings)}\n${ctl.tail(20)}` }
        )
        expect(expected[0]).toContain(": spec.config is not valid JSON")
        for (const line of expected) expect(line).not.toContain("\n")
        yield* awaitMetric(ctl, "whereabouts_controller_failures_total", { reason: "BadAnnotation" }, (v) => v === 2)
        yield* awaitMetric(ctl, "whereabouts_controller_failures_total", { reason: "BadNadConfig" }, (v) => v === 1)

        // Bad input blocked nothing: their addresses were found by podref and freed; nothing of anyone else touched.
        expect(ctl.running()).toBe(true)
        expect(yield* Effect.promise(() => ctl.probe("/healthz"))).toBe(200)
        yield* deletePod(normal)
        yield* waitUntil("the normal deletion is still freed", poolView("10.255.0.0-24"), (v) => v["10.255.0.3"] === undefined, { context: () => ctl.tail() })
        const after = yield* api.get(R.IPPools, poolNs, "10.255.0.0-24")
        expect((after["spec"] as { allocations: Record<string, { podref: string }> }).allocations).toEqual({
          "1": expect.objectContaining({ podref: ref(live) }),
          abc: junk.abc,
          "-1": junk["-1"]
        })
        expect(yield* poolView("10.255.1.0-24")).toEqual({})
        yield* waitForValue("the normal pod's event", Effect.map(gcEvents(ns), (es) => es.filter((e) => e.name === "m-normal")), [
          { name: "m-normal", uid: normal.uid, message: gcMessage("10.255.0.3", "good"), by: "res-e" }
        ])
        expect(yield* Effect.promise(() => ctl.probe("/healthz"))).toBe(200)
        expect(yield* Effect.promise(() => ctl.probe("/readyz"))).toBe(200)
        expect(ctl.running()).toBe(true)
      })
    )
  }, 120_000)
})
