/**
 * Compatibility with what whereabouts 0.9 users have, on a real API server (issue 22; the schedule
 * from whereabouts-config is schedule.test.ts): a pool's capacity from the IPAM config that writes
 * it, addresses on `default: true` network-status entries held by their live pod, and NADs that
 * are not ours (another IPAM, an empty config) next to a whereabouts one never holding back a free.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { poolNearlyFullMessage } from "../../src/programs/pool-usage.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { PluginStore } from "../../src/testing/PluginStore.ts"
import { describeLive, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { nadObject, networkStatus, podObject } from "../support/objects.ts"
import { runCommand, stopAllControllers } from "./support/controller-process.ts"
import { awaitLeading, awaitMetric, launch, metricOf } from "./support/controller.ts"
import { type LiveWorld, createNad, ensureNamespace, eventLines, eventsIn, gcMessage, liveWorld, on, poolView, setPhase, waitForValue, waitUntil } from "./support/world.ts"

const GC = "IPAddressGarbageCollected"
const NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"

describeLive("compatibility with whereabouts 0.9's data on a real API server", () => {
  const kubeconfig = () => runningEnvtest().kubeconfigPath
  /** A pools namespace of the scenario's own (its pools, Lease and Events) and one for its pods. */
  const scenario = <A, E>(prefix: string, body: (ns: string, pools: string) => Effect.Effect<A, E, LiveWorld>) => {
    const pools = uniqueNamespace(prefix)
    return Effect.gen(function* () {
      yield* ensureNamespace(pools)
      yield* ensureNamespace(`${pools}-pods`)
      return yield* body(`${pools}-pods`, pools)
    }).pipe(Effect.provide(liveWorld(pools)), Effect.ensuring(Effect.promise(() => stopAllControllers())))
  }

  it.live("capacity: range_start, range_end and exclude size the pool (a /28 limited to ten reads ten), the alert and audit agree", () =>
    scenario("cap-pools", (ns, pools) =>
      Effect.gen(function* () {
        // 10.248.0.0/28: 14 usable; .1-.12 minus the excluded .4-.5 = ten.
        yield* createNad(ns, "narrow", { range: "10.248.0.0/28", range_start: "10.248.0.1", range_end: "10.248.0.12", exclude: ["10.248.0.4/31"] })
        for (let i = 0; i < 9; i++) yield* startPod(ns, `n${i}`, [on(`${ns}/narrow`)])
        const ctl = yield* launch({ kubeconfig: kubeconfig(), namespace: pools, identity: "cap" })
        yield* awaitLeading(ctl)
        yield* awaitMetric(ctl, "whereabouts_controller_pool_used", { pool: "10.248.0.0-28" }, (v) => v === 9)
        expect(yield* metricOf(ctl, "whereabouts_controller_pool_size", { pool: "10.248.0.0-28" })).toBe(10)
        expect(yield* metricOf(ctl, "whereabouts_controller_pool_free", { pool: "10.248.0.0-28" })).toBe(1)
        expect(yield* metricOf(ctl, "whereabouts_controller_pool_usage_over_threshold", { pool: "10.248.0.0-28" })).toBe(1)
        const warnings = yield* waitUntil(
          "the IPPoolNearlyFull Warning",
          Effect.map(eventsIn(pools), (es) => es.filter((e) => e.reason === "IPPoolNearlyFull")),
          (es) => es.length === 1,
          { context: () => ctl.tail() }
        )
        expect(warnings[0]).toMatchObject({ type: "Warning", kind: "IPPool", name: "10.248.0.0-28", message: poolNearlyFullMessage("10.248.0.0-28", 9, 10, 0.9) })
        const audited = yield* Effect.promise(() => runCommand("audit", { kubeconfig: kubeconfig(), namespace: pools, args: ["-o", "json"] }))
        expect(audited.code, audited.stderr).toBe(0)
        const report = JSON.parse(audited.stdout) as { pools: Array<{ name: string; size: number; sizeFrom: string }> }
        expect(report.pools.map((p) => [p.name, p.size, p.sizeFrom])).toEqual([["10.248.0.0-28", 10, "config"]])
        expect(yield* Effect.promise(() => ctl.stop())).toEqual({ code: 0, signal: null })
      })
    ), 90_000)

  it.live("default: true (whereabouts as the pod network's IPAM, upstream #638): a running pod keeps it, with or without ifname, beside other networks", () =>
    scenario("dflt-pools", (ns, pools) =>
      Effect.gen(function* () {
        const api = yield* KubeApi
        const writer = yield* PluginStore
        yield* writer.createPool("10.247.0.0-24", "10.247.0.0/24")
        yield* writer.updatePool("10.247.0.0-24", () =>
          Either.right({ "1": { id: "c1", podref: `${ns}/vm`, ifname: "eth0" }, "2": { id: "c2", podref: `${ns}/old-vm` }, "3": { id: "c3", podref: `${ns}/gone` } })
        )
        yield* api.create(R.Pods, ns, podObject(ns, "vm", { nodeName: "node-1", status: networkStatus([{ name: "kubevirt-net", interface: "eth0", ips: ["10.247.0.1"], default: true }]) }))
        yield* api.create(
          R.Pods,
          ns,
          podObject(ns, "old-vm", {
            nodeName: "node-1",
            status: networkStatus([{ name: "kubevirt-net", interface: "eth0", ips: ["10.247.0.2"], default: true }, { name: `${ns}/other`, interface: "net1", ips: ["10.99.0.1"] }])
          })
        )
        // Running, as their kubelet reports: a Pending pod keeps its addresses whatever its status says.
        for (const name of ["vm", "old-vm"]) yield* setPhase(ns, name, "Running")
        const audited = yield* Effect.promise(() => runCommand("audit", { kubeconfig: kubeconfig(), namespace: pools, args: ["-o", "json"] }))
        const report = JSON.parse(audited.stdout) as { orphanedAllocations: Array<{ ip: string; podref: string }> }
        expect(report.orphanedAllocations.map((o) => `${o.ip} ${o.podref}`)).toEqual([`10.247.0.3 ${ns}/gone`])
        // The controller's sweep frees the dead pod's entry only.
        const ctl = yield* launch({ kubeconfig: kubeconfig(), namespace: pools, identity: "dflt" })
        yield* awaitLeading(ctl, { sweep: true })
        yield* waitForValue("only the dead pod's entry freed", poolView("10.247.0.0-24"), { "10.247.0.1": `${ns}/vm`, "10.247.0.2": `${ns}/old-vm` }, { context: () => ctl.tail() })
        expect(yield* Effect.promise(() => ctl.stop())).toEqual({ code: 0, signal: null })
      })
    ), 90_000)

  it.live("NADs that are not ours (another IPAM, an empty config) next to a whereabouts one: the deleted pod's address is freed at once, with no Warning", () =>
    scenario("notours-pools", (ns, pools) =>
      Effect.gen(function* () {
        const api = yield* KubeApi
        yield* createNad(ns, "good", { range: "10.246.0.0/24" })
        yield* api.create(R.NetworkAttachmentDefinitions, ns, nadObject(ns, "plain", JSON.stringify({ cniVersion: "0.3.1", name: "plain", type: "macvlan", ipam: { type: "static" } })))
        yield* api.create(R.NetworkAttachmentDefinitions, ns, nadObject(ns, "empty", ""))
        const ctl = yield* launch({ kubeconfig: kubeconfig(), namespace: pools, identity: "notours" })
        yield* awaitLeading(ctl)
        const pod = yield* startPod(ns, "p", [on(`${ns}/good`)])
        // Attached to all three, as Multus reports it.
        const status = networkStatus([
          { name: "cluster", interface: "eth0", ips: ["10.244.0.9"], default: true },
          { name: `${ns}/good`, interface: "net1", ips: [pod.ips[0]!.ips[0]!] },
          { name: `${ns}/plain`, interface: "net2", ips: ["192.168.7.1"] },
          { name: `${ns}/empty`, interface: "net3" }
        ])
        yield* api.patch(R.Pods, ns, "p", { type: "merge", body: { metadata: { annotations: { [NETWORK_STATUS]: status, "k8s.v1.cni.cncf.io/networks": "good@net1,plain@net2,empty@net3" } } } })
        yield* deletePod(pod)
        yield* waitForValue("p's address is freed", poolView("10.246.0.0-24"), {}, { context: () => ctl.tail() })
        yield* waitForValue("one Event: the free", eventLines(ns), [`Normal ${GC} p: ${gcMessage(pod.ips[0]!.ips[0]!, "good")}`], { context: () => ctl.tail() })
        expect(yield* metricOf(ctl, "whereabouts_controller_ips_freed_total", { trigger: "deletion" })).toBe(1)
        expect(yield* metricOf(ctl, "whereabouts_controller_failures_total")).toBe(0)
        expect(yield* Effect.promise(() => ctl.stop())).toEqual({ code: 0, signal: null })
      })
    ), 90_000)
})
