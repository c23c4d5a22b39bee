/**
 * End to end with the real allocator: the upstream whereabouts CNI plugin (v0.9.2, built by
 * scripts/whereabouts-plugin.sh) writes every pool entry and reservation, run as a container
 * runtime runs it, and the controller runs as `npm start` runs it. Pods are deleted with grace 0
 * WITHOUT CNI DEL (the leak) unless a scenario says otherwise. Each scenario ends with an exact end
 * state read back from the API server: whole pools (address → podref, container id, ifname) and
 * whole reservation specs, so a live pod's entry that changed in any field fails as surely as a
 * dead pod's that stayed.
 *
 * Upstream's reclaim scenario (scale down, re-inject the allocations, scale up) runs as upstream
 * wrote it, in its e2e suite on real controllers (upstream-e2e.test.ts).
 *
 * One controller serves the scenarios (each in its own pod namespace, with its own ranges, all
 * pools in one namespace shared with the plugin); scenarios about start-up sweeps stop it and
 * start another.
 */
import { afterAll, beforeAll, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import type { Attachment, RunningPod } from "../../src/testing/cni-plugin.ts"
import { PluginStore } from "../../src/testing/PluginStore.ts"
import { describeWithPlugin, pluginBinary, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { type ControllerProcess, runCommand, stopAllControllers } from "./support/controller-process.ts"
import { awaitMetric, logsWith, metricOf, sharedController } from "./support/controller.ts"
import { PluginNode, deletePod, newContainerId, pluginNode, retrySandbox, startPod, statefulSet } from "./support/upstream-plugin.ts"
import {
  createNad,
  ensureNamespace,
  eventLines,
  eventsIn,
  gcMessage,
  type LiveWorld,
  liveWorld,
  on,
  poolEntries,
  reservationSpecs,
  setPhase,
  waitForEqual
} from "./support/world.ts"

const GC = "IPAddressGarbageCollected"
const ref = (p: { readonly namespace: string; readonly name: string }) => `${p.namespace}/${p.name}`
const ipsOf = (p: RunningPod) => p.ips.map((i) => i.ips)

/** A pool entry as the plugin writes it for `p` on `ifname`. */
const entry = (p: RunningPod, ifname = "net1") => ({ podref: ref(p), id: p.containerId, ifname })
/** A reservation as the plugin writes it: podref and ifname, no container id. */
const reserved = (p: RunningPod, ifname = "net1") => ({ podref: ref(p), ifname })
const gcLine = (pod: string, ip: string, nad: string) => `Normal ${GC} ${pod}: ${gcMessage(ip, nad)}`

/** startPod for each name, in order; one pod per name, typed as such. */
const startAll = <const N extends ReadonlyArray<string>>(ns: string, names: N, attachments: ReadonlyArray<Attachment>) =>
  Effect.map(Effect.forEach(names, (n) => startPod(ns, n, attachments)), (pods) => pods as unknown as { -readonly [K in keyof N]: RunningPod })

const conflist = (name: string, cniVersion: string, ipam: Record<string, unknown>) =>
  JSON.stringify({
    cniVersion,
    name,
    plugins: [
      { type: "macvlan", master: "eth0", mode: "bridge", ipam: { type: "whereabouts", ...ipam } },
      { type: "tuning", sysctl: { "net.ipv4.conf.all.arp_notify": "1" } }
    ]
  })

describeWithPlugin("end to end with the upstream whereabouts CNI plugin as the allocator", () => {
  const POOLS = uniqueNamespace("up-pools")
  const kubeconfig = () => runningEnvtest().kubeconfigPath
  const shared = sharedController(() => ({ kubeconfig: kubeconfig(), namespace: POOLS, identity: `up-${Date.now().toString(36)}` }))
  const controller = shared.get
  const stopController = Effect.gen(function* () {
    const running = shared.current()
    if (running !== undefined && running.running()) expect(yield* Effect.promise(() => running.stop())).toEqual({ code: 0, signal: null })
  })
  const world = <A, E>(body: Effect.Effect<A, E, LiveWorld | PluginNode>) =>
    body.pipe(Effect.provide(Layer.merge(liveWorld(POOLS), pluginNode({ binary: pluginBinary(), kubeconfig: kubeconfig(), namespace: POOLS }))))
  /** Deleted pods taken into a batch so far (each deletion the controller saw counts once). */
  const taken = (c: ControllerProcess) => Effect.map(metricOf(c, "whereabouts_controller_workqueue_queue_duration_seconds_count"), (n) => n ?? 0)
  const freed = (c: ControllerProcess, trigger: "deletion" | "sweep") => Effect.map(metricOf(c, "whereabouts_controller_ips_freed_total", { trigger }), (n) => n ?? 0)

  beforeAll(() => Effect.runPromise(world(ensureNamespace(POOLS))), 60_000)
  afterAll(() => stopAllControllers(), 60_000)

  it.live("IPv4: a leaked pod's entry and reservation are freed; one deleted with CNI DEL was freed by the plugin and gets no event; the live pods keep theirs", () =>
    world(
      Effect.gen(function* () {
        const c = yield* controller
        const ns = uniqueNamespace("up-v4")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "net", { range: "10.231.0.0/24" })
        const [a, b, cc, d] = yield* startAll(ns, ["a", "b", "c", "d"], [on(`${ns}/net`)])
        expect([a, b, cc, d].map(ipsOf)).toEqual([[["10.231.0.1"]], [["10.231.0.2"]], [["10.231.0.3"]], [["10.231.0.4"]]])
        expect(yield* poolEntries("10.231.0.0-24")).toEqual({ "10.231.0.1": entry(a), "10.231.0.2": entry(b), "10.231.0.3": entry(cc), "10.231.0.4": entry(d) })
        expect(yield* reservationSpecs("10.231.")).toEqual({ "10.231.0.1": reserved(a), "10.231.0.2": reserved(b), "10.231.0.3": reserved(cc), "10.231.0.4": reserved(d) })

        const [takenBefore, freedBefore] = [yield* taken(c), yield* freed(c, "deletion")]
        yield* deletePod(d, { cniDel: true })
        yield* deletePod(b)
        yield* awaitMetric(c, "whereabouts_controller_workqueue_queue_duration_seconds_count", {}, (n) => (n ?? 0) >= takenBefore + 2)
        yield* waitForEqual("only b's entry is freed by the controller", poolEntries("10.231.0.0-24"), { "10.231.0.1": entry(a), "10.231.0.3": entry(cc) })
        yield* waitForEqual("b's reservation is deleted (d's went with its DEL)", reservationSpecs("10.231."), { "10.231.0.1": reserved(a), "10.231.0.3": reserved(cc) })
        yield* waitForEqual("one event, b's", eventLines(ns), [gcLine("b", "10.231.0.2", "net")])
        yield* awaitMetric(c, "whereabouts_controller_ips_freed_total", { trigger: "deletion" }, (n) => n === freedBefore + 1)
      })
    ), 60_000)

  it.live("IPv6: the first and last of three pods leak; the middle one keeps its address and reservation", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-v6")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "v6", { range: "fd00:232::/64" })
        const [a, b, cc] = yield* startAll(ns, ["a", "b", "c"], [on(`${ns}/v6`)])
        expect([a, b, cc].map(ipsOf)).toEqual([[["fd00:232::1"]], [["fd00:232::2"]], [["fd00:232::3"]]])
        expect(yield* reservationSpecs("fd00-232-")).toEqual({ "fd00-232--1": reserved(a), "fd00-232--2": reserved(b), "fd00-232--3": reserved(cc) })
        yield* deletePod(a)
        yield* deletePod(cc)
        yield* waitForEqual("a and c freed", poolEntries("fd00-232---64"), { "fd00:232::2": entry(b) })
        yield* waitForEqual("their reservations deleted", reservationSpecs("fd00-232-"), { "fd00-232--2": reserved(b) })
        yield* waitForEqual("two events", eventLines(ns), [gcLine("a", "fd00:232::1", "v6"), gcLine("c", "fd00:232::3", "v6")])
      })
    ), 60_000)

  it.live("dual stack (ipRanges v4 + v6): both addresses of the dead pod, both pools, both reservations", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-dual")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "ds", { ipRanges: [{ range: "10.233.0.0/24" }, { range: "fd00:233::/64" }] })
        const [a, b] = yield* startAll(ns, ["a", "b"], [on(`${ns}/ds`)])
        expect([a, b].map(ipsOf)).toEqual([[["10.233.0.1", "fd00:233::1"]], [["10.233.0.2", "fd00:233::2"]]])
        yield* deletePod(a)
        yield* waitForEqual("v4 freed", poolEntries("10.233.0.0-24"), { "10.233.0.2": entry(b) })
        yield* waitForEqual("v6 freed", poolEntries("fd00-233---64"), { "fd00:233::2": entry(b) })
        yield* waitForEqual("both reservations deleted", Effect.zip(reservationSpecs("10.233."), reservationSpecs("fd00-233-")), [
          { "10.233.0.2": reserved(b) },
          { "fd00-233--2": reserved(b) }
        ])
        yield* waitForEqual("two events", eventLines(ns), [gcLine("a", "10.233.0.1", "ds"), gcLine("a", "fd00:233::1", "ds")])
      })
    ), 60_000)

  it.live("range plus ipRanges: the top-level range comes first, one address per range, all three freed", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-mixed")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "mixed", { range: "10.234.0.0/24", ipRanges: [{ range: "fd00:234::/64" }, { range: "10.234.1.0/24" }] })
        const [a, b] = yield* startAll(ns, ["a", "b"], [on(`${ns}/mixed`)])
        expect(ipsOf(a)).toEqual([["10.234.0.1", "fd00:234::1", "10.234.1.1"]])
        yield* deletePod(b)
        const pools = Effect.all([poolEntries("10.234.0.0-24"), poolEntries("fd00-234---64"), poolEntries("10.234.1.0-24")])
        yield* waitForEqual("b freed from all three pools", pools, [{ "10.234.0.1": entry(a) }, { "fd00:234::1": entry(a) }, { "10.234.1.1": entry(a) }])
        const all = Effect.all([reservationSpecs("10.234."), reservationSpecs("fd00-234-")])
        yield* waitForEqual("b's three reservations deleted", all, [{ "10.234.0.1": reserved(a), "10.234.1.1": reserved(a) }, { "fd00-234--1": reserved(a) }])
        yield* waitForEqual("three events", eventLines(ns), [
          gcLine("b", "10.234.0.2", "mixed"),
          gcLine("b", "10.234.1.2", "mixed"),
          gcLine("b", "fd00:234::2", "mixed")
        ])
      })
    ), 60_000)

  it.live("named networks sharing a CIDR with each other and an unnamed one: separate pools and reservation names; only the dead pods' networks change", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-named")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "blue-nad", { range: "10.235.0.0/24", network_name: "blue" })
        yield* createNad(ns, "green-nad", { range: "10.235.0.0/24", network_name: "green" })
        yield* createNad(ns, "plain", { range: "10.235.0.0/24" })
        const nb = yield* startPod(ns, "nb", [on(`${ns}/blue-nad`)])
        const ng = yield* startPod(ns, "ng", [on(`${ns}/green-nad`)])
        const nu = yield* startPod(ns, "nu", [on(`${ns}/plain`)])
        // Reservations are per network name: the three networks all hand out .1.
        expect([nb, ng, nu].map(ipsOf)).toEqual([[["10.235.0.1"]], [["10.235.0.1"]], [["10.235.0.1"]]])
        const reservations = Effect.all([reservationSpecs("blue-10.235."), reservationSpecs("green-10.235."), reservationSpecs("10.235.")])
        expect(yield* reservations).toEqual([{ "blue-10.235.0.1": reserved(nb) }, { "green-10.235.0.1": reserved(ng) }, { "10.235.0.1": reserved(nu) }])
        yield* deletePod(nb)
        yield* deletePod(nu)
        yield* waitForEqual("blue and unnamed freed, green intact", Effect.all([poolEntries("blue-10.235.0.0-24"), poolEntries("green-10.235.0.0-24"), poolEntries("10.235.0.0-24")]), [
          {},
          { "10.235.0.1": entry(ng) },
          {}
        ])
        yield* waitForEqual("only green's reservation is left", reservations, [{}, { "green-10.235.0.1": reserved(ng) }, {}])
        yield* waitForEqual("one event per freed address, naming the NAD", eventLines(ns), [gcLine("nb", "10.235.0.1", "blue-nad"), gcLine("nu", "10.235.0.1", "plain")])
      })
    ), 60_000)

  it.live("conflist NADs (CNI 1.0.0 v4, 0.4.0 v6): the plugin gets the list's name and version; the controller finds the whereabouts plugin in the list", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-conflist")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "list4", conflist("list4", "1.0.0", { range: "10.236.0.0/24" }))
        yield* createNad(ns, "list6", conflist("list6", "0.4.0", { ipRanges: [{ range: "fd00:236::/64" }] }))
        const attach = [on(`${ns}/list4`, "net1"), on(`${ns}/list6`, "net2")]
        const [a, b] = yield* startAll(ns, ["a", "b"], attach)
        expect(ipsOf(a)).toEqual([["10.236.0.1"], ["fd00:236::1"]])
        yield* deletePod(a)
        yield* waitForEqual("a freed from both pools", Effect.all([poolEntries("10.236.0.0-24"), poolEntries("fd00-236---64")]), [
          { "10.236.0.2": entry(b, "net1") },
          { "fd00:236::2": entry(b, "net2") }
        ])
        yield* waitForEqual("a's reservations deleted", Effect.all([reservationSpecs("10.236."), reservationSpecs("fd00-236-")]), [
          { "10.236.0.2": reserved(b, "net1") },
          { "fd00-236--2": reserved(b, "net2") }
        ])
        yield* waitForEqual("two events", eventLines(ns), [gcLine("a", "10.236.0.1", "list4"), gcLine("a", "fd00:236::1", "list6")])
      })
    ), 60_000)

  it.live("exclude with range_start/range_end, and the start-CIDR form with an exclude: a freed address is handed out again, a full window frees up for a retried sandbox", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-window")
        yield* ensureNamespace(ns)
        // .10-.20, minus .10/31 and .13: .12, .14, .15, ...
        yield* createNad(ns, "bounded", { range: "10.237.0.0/24", range_start: "10.237.0.10", range_end: "10.237.0.20", exclude: ["10.237.0.10/31", "10.237.0.13"] })
        // .5-.7 minus .6: two addresses.
        yield* createNad(ns, "window", { ipRanges: [{ range: "10.237.1.5-10.237.1.7/24", exclude: ["10.237.1.6/32"] }] })
        const [p1, p2, p3] = yield* startAll(ns, ["p1", "p2", "p3"], [on(`${ns}/bounded`)])
        expect([p1, p2, p3].map(ipsOf)).toEqual([[["10.237.0.12"]], [["10.237.0.14"]], [["10.237.0.15"]]])
        const [w1, w2] = yield* startAll(ns, ["w1", "w2"], [on(`${ns}/window`)])
        expect([w1, w2].map(ipsOf)).toEqual([[["10.237.1.5"]], [["10.237.1.7"]]])
        const full = yield* Effect.either(startPod(ns, "w3", [on(`${ns}/window`)]))
        expect(Either.isLeft(full) && full.left.message).toMatch(/Could not allocate IP in range/)

        yield* deletePod(p2)
        yield* deletePod(w1)
        yield* waitForEqual("p2 and w1 freed", Effect.all([poolEntries("10.237.0.0-24"), poolEntries("10.237.1.0-24")]), [
          { "10.237.0.12": entry(p1), "10.237.0.15": entry(p3) },
          { "10.237.1.7": entry(w2) }
        ])
        const p4 = yield* startPod(ns, "p4", [on(`${ns}/bounded`)])
        const w3 = yield* retrySandbox(ns, "w3", [on(`${ns}/window`)])
        expect([ipsOf(p4), ipsOf(w3)]).toEqual([[["10.237.0.14"]], [["10.237.1.5"]]])
        expect(yield* Effect.all([poolEntries("10.237.0.0-24"), poolEntries("10.237.1.0-24")])).toEqual([
          { "10.237.0.12": entry(p1), "10.237.0.14": entry(p4), "10.237.0.15": entry(p3) },
          { "10.237.1.5": entry(w3), "10.237.1.7": entry(w2) }
        ])
        expect(yield* reservationSpecs("10.237.")).toEqual({
          "10.237.0.12": reserved(p1),
          "10.237.0.14": reserved(p4),
          "10.237.0.15": reserved(p3),
          "10.237.1.5": reserved(w3),
          "10.237.1.7": reserved(w2)
        })
        yield* waitForEqual("two events", eventLines(ns), [gcLine("p2", "10.237.0.14", "bounded"), gcLine("w1", "10.237.1.5", "window")])
      })
    ), 60_000)

  it.live("overlapping ranges on and off: a reservation blocks the overlapping range and goes with its address; a pod of the range without reservations never takes another pod's", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-overlap")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "wide", { range: "10.238.0.0/24" })
        yield* createNad(ns, "narrow", { range: "10.238.0.0/25" })
        yield* createNad(ns, "flat", { range: "10.238.0.0/26", enable_overlapping_ranges: false })
        const o1 = yield* startPod(ns, "o1", [on(`${ns}/wide`)])
        const o2 = yield* startPod(ns, "o2", [on(`${ns}/narrow`)])
        const f1 = yield* startPod(ns, "f1", [on(`${ns}/flat`)])
        const f2 = yield* startPod(ns, "f2", [on(`${ns}/flat`)])
        // o1's reservation of .1 makes the narrow range skip it; the flat range checks none.
        expect([o1, o2, f1, f2].map(ipsOf)).toEqual([[["10.238.0.1"]], [["10.238.0.2"]], [["10.238.0.1"]], [["10.238.0.2"]]])
        expect(yield* reservationSpecs("10.238.")).toEqual({ "10.238.0.1": reserved(o1), "10.238.0.2": reserved(o2) })

        // f1 and f2 hold the addresses o1 and o2 have reservations for: freeing theirs must not touch those.
        yield* deletePod(o1)
        yield* deletePod(f1)
        yield* deletePod(f2)
        const pools = Effect.all([poolEntries("10.238.0.0-24"), poolEntries("10.238.0.0-25"), poolEntries("10.238.0.0-26")])
        yield* waitForEqual("o1, f1, f2 freed", pools, [{}, { "10.238.0.2": entry(o2) }, {}])
        yield* waitForEqual("o1's reservation deleted, o2's kept", reservationSpecs("10.238."), { "10.238.0.2": reserved(o2) })
        yield* waitForEqual("three events", eventLines(ns), [gcLine("f1", "10.238.0.1", "flat"), gcLine("f2", "10.238.0.2", "flat"), gcLine("o1", "10.238.0.1", "wide")])
        // With o1's reservation gone the narrow range hands out .1 again.
        const o3 = yield* startPod(ns, "o3", [on(`${ns}/narrow`)])
        expect(ipsOf(o3)).toEqual([["10.238.0.1"]])
        expect(yield* pools).toEqual([{}, { "10.238.0.1": entry(o3), "10.238.0.2": entry(o2) }, {}])
        expect(yield* reservationSpecs("10.238.")).toEqual({ "10.238.0.1": reserved(o3), "10.238.0.2": reserved(o2) })
      })
    ), 60_000)

  it.live("the same NAD three times on one pod: three entries in one pool, told apart by ifname; all three freed, the other pod's three kept", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-thrice")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "tri", { range: "10.239.0.0/24" })
        const attach = [on(`${ns}/tri`, "net1"), on(`${ns}/tri`, "net2"), on(`${ns}/tri`, "net3")]
        const keeper = yield* startPod(ns, "keeper", attach)
        const tri = yield* startPod(ns, "tri", attach)
        expect(ipsOf(tri)).toEqual([["10.239.0.4"], ["10.239.0.5"], ["10.239.0.6"]])
        yield* deletePod(tri)
        const kept = { "10.239.0.1": entry(keeper, "net1"), "10.239.0.2": entry(keeper, "net2"), "10.239.0.3": entry(keeper, "net3") }
        yield* waitForEqual("tri's three entries freed", poolEntries("10.239.0.0-24"), kept)
        yield* waitForEqual("and its reservations", reservationSpecs("10.239."), {
          "10.239.0.1": reserved(keeper, "net1"),
          "10.239.0.2": reserved(keeper, "net2"),
          "10.239.0.3": reserved(keeper, "net3")
        })
        yield* waitForEqual("three events", eventLines(ns), [4, 5, 6].map((i) => gcLine("tri", `10.239.0.${i}`, "tri")))
      })
    ), 60_000)

  it.live("a StatefulSet pod reborn under its name while the controller runs: the plugin's ADD gives it its address back, and the controller leaves it (either order of their writes)", () =>
    world(
      Effect.gen(function* () {
        const c = yield* controller
        const ns = uniqueNamespace("up-reborn")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "storage", { range: "10.240.0.0/30" })
        const db = statefulSet("db", [on(`${ns}/storage`)], ns)
        yield* db.scaleTo(2)
        const [db0, old] = db.pods() as [RunningPod, RunningPod]
        const batches = (yield* metricOf(c, "whereabouts_controller_free_batch_duration_seconds_count")) ?? 0
        yield* deletePod(old)
        const reborn = yield* startPod(ns, "db-1", [on(`${ns}/storage`)])
        expect(reborn.uid).not.toBe(old.uid)
        expect(ipsOf(reborn)).toEqual([["10.240.0.2"]])
        yield* awaitMetric(c, "whereabouts_controller_free_batch_duration_seconds_count", {}, (n) => (n ?? 0) > batches)
        expect(yield* poolEntries("10.240.0.0-30")).toEqual({ "10.240.0.1": entry(db0), "10.240.0.2": entry(reborn) })
        // The controller either saw db-1 alive again (no event), or freed the address before the ADD
        // took it (one event, the old pod's; the ADD then wrote a new reservation), or its guarded
        // release met the entry the ADD had rewritten and gave back the reservation it had deleted.
        // Every way, the reservation reads as the plugin writes it.
        const gc = (yield* eventsIn(ns)).filter((e) => e.reason === GC).map((e) => [e.uid, e.message])
        if (gc.length > 0) expect(gc).toEqual([[old.uid, gcMessage("10.240.0.2", "storage")]])
        const spec = (yield* reservationSpecs("10.240."))["10.240.0.2"]
        expect(spec).toEqual(reserved(reborn))
        const kept = logsWith(c, "kept addresses of deleted pod", { pod: ref(old) }).length > 0
        console.info(`reborn: the controller ${gc.length > 0 ? "freed the address before the ADD" : kept ? "saw db-1 alive again" : "met the entry the ADD rewrote"}`)
        // Nothing leaked: the pool is full.
        const third = yield* Effect.either(startPod(ns, "db-2", [on(`${ns}/storage`)]))
        expect(Either.isLeft(third)).toBe(true)
      })
    ), 60_000)

  it.live("a StatefulSet pod reborn while no controller runs: the plugin's idempotent ADD gives it the old address though a lower one is free, with the new container id; the start-up sweep keeps it", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-reborn-down")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "storage", { range: "10.240.1.0/29" })
        const other = yield* startPod(ns, "other", [on(`${ns}/storage`)])
        const db = statefulSet("db", [on(`${ns}/storage`)], ns)
        yield* db.scaleTo(2)
        const [db0, old] = db.pods() as [RunningPod, RunningPod]
        expect([other, db0, old].map(ipsOf)).toEqual([[["10.240.1.1"]], [["10.240.1.2"]], [["10.240.1.3"]]])
        yield* deletePod(other, { cniDel: true })
        expect(yield* poolEntries("10.240.1.0-29")).toEqual({ "10.240.1.2": entry(db0), "10.240.1.3": entry(old) })

        yield* stopController
        yield* deletePod(old)
        const reborn = yield* startPod(ns, "db-1", [on(`${ns}/storage`)])
        expect(ipsOf(reborn)).toEqual([["10.240.1.3"]])
        expect(reborn.containerId).not.toBe(old.containerId)
        yield* setPhase(ns, "db-0", "Running")
        yield* setPhase(ns, "db-1", "Running")
        yield* controller
        expect(yield* poolEntries("10.240.1.0-29")).toEqual({ "10.240.1.2": entry(db0), "10.240.1.3": entry(reborn) })
        expect(yield* reservationSpecs("10.240.1.")).toEqual({ "10.240.1.2": reserved(db0), "10.240.1.3": reserved(reborn) })
        expect(yield* eventLines(ns)).toEqual([])
      })
    ), 90_000)

  it.live("a duplicate allocation of one pod at a second offset: the start-up sweep frees the one the pod does not hold, keeps the one it does", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-dup")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "dup", { range: "10.242.0.0/24" })
        const p = yield* startPod(ns, "p", [on(`${ns}/dup`)])
        const q = yield* startPod(ns, "q", [on(`${ns}/dup`)])
        yield* setPhase(ns, "p", "Running")
        yield* setPhase(ns, "q", "Running")
        // p allocated again at offset 7 by an earlier sandbox whose ADD result was lost, with the
        // reservation the plugin would have written: p's network-status lists only .1.
        const writer = yield* PluginStore
        const earlier = newContainerId()
        yield* writer.updatePool("10.242.0.0-24", (a) => Either.right({ ...a, "7": { id: earlier, podref: ref(p), ifname: "net1" } }))
        yield* writer.createReservation("10.242.0.7", reserved(p))

        yield* stopController
        yield* controller
        yield* waitForEqual("the entry p does not hold is freed", poolEntries("10.242.0.0-24"), { "10.242.0.1": entry(p), "10.242.0.2": entry(q) })
        yield* waitForEqual("and its reservation", reservationSpecs("10.242."), { "10.242.0.1": reserved(p), "10.242.0.2": reserved(q) })
        yield* waitForEqual("one event on the live pod", eventLines(ns), [gcLine("p", "10.242.0.7", "dup")])
      })
    ), 90_000)

  it.live("deletions while no controller runs are freed by the start-up sweep; the pods still alive keep theirs", () =>
    world(
      Effect.gen(function* () {
        yield* controller
        const ns = uniqueNamespace("up-down")
        yield* ensureNamespace(ns)
        yield* createNad(ns, "down", { ipRanges: [{ range: "10.243.0.0/24" }, { range: "fd00:243::/64" }] })
        const pods = yield* startAll(ns, ["d0", "d1", "d2", "d3"], [on(`${ns}/down`)])
        yield* stopController
        yield* deletePod(pods[0])
        yield* deletePod(pods[2])
        yield* controller
        const [d1, d3] = [pods[1], pods[3]]
        yield* waitForEqual("the sweep freed d0 and d2", Effect.all([poolEntries("10.243.0.0-24"), poolEntries("fd00-243---64")]), [
          { "10.243.0.2": entry(d1), "10.243.0.4": entry(d3) },
          { "fd00:243::2": entry(d1), "fd00:243::4": entry(d3) }
        ])
        yield* waitForEqual("and their reservations", Effect.all([reservationSpecs("10.243."), reservationSpecs("fd00-243-")]), [
          { "10.243.0.2": reserved(d1), "10.243.0.4": reserved(d3) },
          { "fd00-243--2": reserved(d1), "fd00-243--4": reserved(d3) }
        ])
        yield* waitForEqual("one event per address", eventLines(ns), [
          gcLine("d0", "10.243.0.1", "down"),
          gcLine("d0", "fd00:243::1", "down"),
          gcLine("d2", "10.243.0.3", "down"),
          gcLine("d2", "fd00:243::3", "down")
        ])
      })
    ), 90_000)

  it.live("node slices (unnamed and named networks, two nodes): the plugin writes per-node pools; the cluster audits clean; a deletion and a sweep free exactly the dead pods' entries and reservations", () =>
    world(
      Effect.gen(function* () {
        const c = yield* controller
        const api = yield* KubeApi
        const ns = uniqueNamespace("up-slice")
        yield* ensureNamespace(ns)
        // Two node-slice networks: "slices" (unnamed: its NodeSlicePool is named after the config)
        // and "storage-sl" (network_name). Their NodeSlicePools are written here as upstream's
        // node-slice controller writes them.
        yield* createNad(ns, "slices", { range: "10.244.0.0/24", node_slice_size: "/28" })
        yield* createNad(ns, "storage-nad", { range: "10.245.0.0/24", node_slice_size: "/28", network_name: "storage-sl" })
        const nodeSlicePool = (name: string, range: string, allocations: ReadonlyArray<[string, string]>) =>
          api.create(R.NodeSlicePools, POOLS, {
            metadata: { name, namespace: POOLS },
            spec: { range, sliceSize: "/28" },
            status: { allocations: allocations.map(([nodeName, sliceRange]) => ({ nodeName, sliceRange })) }
          })
        yield* nodeSlicePool("slices", "10.244.0.0/24", [["node-a", "10.244.0.0/28"], ["node-b", "10.244.0.16/28"], ["", "10.244.0.32/28"]])
        yield* nodeSlicePool("storage-sl", "10.245.0.0/24", [["node-a", "10.245.0.0/28"], ["node-b", "10.245.0.16/28"]])
        const onNode = <A, E, R>(node: string, effect: Effect.Effect<A, E, R>) =>
          effect.pipe(Effect.provide(pluginNode({ binary: pluginBinary(), kubeconfig: kubeconfig(), namespace: POOLS, nodeName: node })))
        const both = [on(`${ns}/slices`), on(`${ns}/storage-nad`, "net2")]
        const a1 = yield* onNode("node-a", startPod(ns, "a1", both, "node-a"))
        const a2 = yield* onNode("node-a", startPod(ns, "a2", both, "node-a"))
        const b1 = yield* onNode("node-b", startPod(ns, "b1", both, "node-b"))
        const b2 = yield* onNode("node-b", startPod(ns, "b2", both, "node-b"))
        expect([a1, a2, b1, b2].map(ipsOf)).toEqual([
          [["10.244.0.1"], ["10.245.0.1"]],
          [["10.244.0.2"], ["10.245.0.2"]],
          [["10.244.0.17"], ["10.245.0.17"]],
          [["10.244.0.18"], ["10.245.0.18"]]
        ])
        const pools = Effect.all([
          poolEntries("node-a-10.244.0.0-28"),
          poolEntries("node-b-10.244.0.16-28"),
          poolEntries("storage-sl-node-a-10.245.0.0-28"),
          poolEntries("storage-sl-node-b-10.245.0.16-28")
        ])
        const all = (p: ReadonlyArray<RunningPod>, ip: (x: RunningPod) => string, ifname: string) => Object.fromEntries(p.map((x) => [ip(x), entry(x, ifname)]))
        expect(yield* pools).toEqual([
          all([a1, a2], (x) => x.ips[0]!.ips[0]!, "net1"),
          all([b1, b2], (x) => x.ips[0]!.ips[0]!, "net1"),
          all([a1, a2], (x) => x.ips[1]!.ips[0]!, "net2"),
          all([b1, b2], (x) => x.ips[1]!.ips[0]!, "net2")
        ])
        // Reservations carry no node: <ip> and <network_name>-<ip>.
        const reservationsOf = Effect.all([reservationSpecs("10.244."), reservationSpecs("storage-sl-")])
        expect(yield* reservationsOf).toEqual([
          { "10.244.0.1": reserved(a1), "10.244.0.17": reserved(b1), "10.244.0.18": reserved(b2), "10.244.0.2": reserved(a2) },
          { "storage-sl-10.245.0.1": reserved(a1, "net2"), "storage-sl-10.245.0.17": reserved(b1, "net2"), "storage-sl-10.245.0.18": reserved(b2, "net2"), "storage-sl-10.245.0.2": reserved(a2, "net2") }
        ])

        // Healthy: audit exits 0, every pool under its network with its node.
        const audited = yield* Effect.promise(() => runCommand("audit", { kubeconfig: kubeconfig(), namespace: POOLS, args: ["--output", "json"] }))
        const report = JSON.parse(audited.stdout) as { pools: Array<Record<string, unknown>>; orphanedAllocations: ReadonlyArray<unknown>; orphanedReservations: ReadonlyArray<unknown> }
        expect(report.orphanedAllocations).toEqual([])
        expect(report.orphanedReservations).toEqual([])
        expect(audited.code).toBe(0)
        expect(report.pools.filter((p) => String(p["name"]).includes("node-")).map((p) => [p["name"], p["network"], p["node"], p["size"], p["used"]])).toEqual([
          ["node-a-10.244.0.0-28", "slices", "node-a", 14, 2],
          ["node-b-10.244.0.16-28", "slices", "node-b", 14, 2],
          ["storage-sl-node-a-10.245.0.0-28", "storage-sl", "node-a", 14, 2],
          ["storage-sl-node-b-10.245.0.16-28", "storage-sl", "node-b", 14, 2]
        ])

        // A deletion: a2's two slice entries and reservations, Events naming the NADs.
        yield* deletePod(a2)
        yield* waitForEqual("a2's slice entries freed", pools, [
          all([a1], (x) => x.ips[0]!.ips[0]!, "net1"),
          all([b1, b2], (x) => x.ips[0]!.ips[0]!, "net1"),
          all([a1], (x) => x.ips[1]!.ips[0]!, "net2"),
          all([b1, b2], (x) => x.ips[1]!.ips[0]!, "net2")
        ])
        yield* waitForEqual("and its reservations", reservationsOf, [
          { "10.244.0.1": reserved(a1), "10.244.0.17": reserved(b1), "10.244.0.18": reserved(b2) },
          { "storage-sl-10.245.0.1": reserved(a1, "net2"), "storage-sl-10.245.0.17": reserved(b1, "net2"), "storage-sl-10.245.0.18": reserved(b2, "net2") }
        ])
        yield* waitForEqual("two events naming the NADs", eventLines(ns), [gcLine("a2", "10.244.0.2", "slices"), gcLine("a2", "10.245.0.2", "storage-nad")])

        // Downtime: b2 deleted while no controller runs; the start-up sweep frees it.
        yield* stopController
        yield* deletePod(b2)
        yield* controller
        yield* waitForEqual("the sweep freed b2's slice entries", pools, [
          all([a1], (x) => x.ips[0]!.ips[0]!, "net1"),
          all([b1], (x) => x.ips[0]!.ips[0]!, "net1"),
          all([a1], (x) => x.ips[1]!.ips[0]!, "net2"),
          all([b1], (x) => x.ips[1]!.ips[0]!, "net2")
        ])
        yield* waitForEqual("and its reservations", reservationsOf, [
          { "10.244.0.1": reserved(a1), "10.244.0.17": reserved(b1) },
          { "storage-sl-10.245.0.1": reserved(a1, "net2"), "storage-sl-10.245.0.17": reserved(b1, "net2") }
        ])
        void c
      })
    ), 120_000)
})
