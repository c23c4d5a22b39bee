/**
 * Pods that still exist but will never run again, against a real API server with the controller
 * as a process: a pod held Terminating with the taint manager's mark, a Succeeded and a Failed
 * pod, a pod on a deleted node and one on an out-of-service node are freed while their objects
 * remain; a running pod on a healthy node keeps its address; a StatefulSet pod's replacement gets
 * an address once the old object is gone.
 *
 * The same lifecycles played by Kubernetes' own controllers are in lifecycle.test.ts and
 * node-loss.test.ts. This file keeps the scripted shapes those cannot produce on demand: every
 * reason in one controller run, each with its exact Event and trigger metric, where on real
 * controllers a node gone or out of service is a race between pod GC, taint eviction and the
 * controller over which reason frees first.
 */
import { afterAll, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { startPod } from "../../src/testing/cni-plugin.ts"
import { nodeObject } from "../support/objects.ts"
import { describeLive, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { stopAllControllers } from "./support/controller-process.ts"
import { awaitLeading, awaitMetric, launch } from "./support/controller.ts"
import { createNad, ensureNamespace, eventLines, gcMessage, liveWorld, on, patchPodStatus, poolView, reservationView, setPhase, waitForEqual } from "./support/world.ts"

const OUT_OF_SERVICE = { key: "node.kubernetes.io/out-of-service", effect: "NoExecute" }
const GC = "IPAddressGarbageCollected"

describeLive("pods that will never run again, on a real API server", () => {
  const POOLS = uniqueNamespace("nra-pools")
  afterAll(() => stopAllControllers(), 60_000)

  it.live("finished, evicted by the taint manager, on a deleted node, on an out-of-service node: freed while the objects remain; a running pod untouched; a StatefulSet's replacement gets an address", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const ns = uniqueNamespace("nra")
      yield* ensureNamespace(POOLS)
      yield* ensureNamespace(ns)
      const [alive, dying, dead] = [`${ns}-alive`, `${ns}-dying`, `${ns}-dead`]
      for (const n of [alive, dying, dead]) yield* api.create(R.Nodes, undefined, nodeObject(n))
      yield* createNad(ns, "net", { range: "10.226.0.0/24" })
      yield* createNad(ns, "small", { range: "10.227.0.0/30" })
      const ctl = yield* launch({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: POOLS, identity: `nra-${Date.now().toString(36)}`, args: ["--terminating-grace", "1 second"] })
      yield* awaitLeading(ctl)

      const running = yield* startPod(ns, "running", [on(`${ns}/net`)], alive)
      const succeeded = yield* startPod(ns, "succeeded", [on(`${ns}/net`)], alive)
      const failed = yield* startPod(ns, "failed", [on(`${ns}/net`)], alive)
      const evicted = yield* startPod(ns, "evicted", [on(`${ns}/net`)], dying)
      const orphaned = yield* startPod(ns, "orphaned", [on(`${ns}/net`)], dead)
      const stranded = yield* startPod(ns, "stranded", [on(`${ns}/net`)], dying)
      const hold = (name: string) =>
        Effect.gen(function* () {
          yield* api.patch(R.Pods, ns, name, { type: "merge", body: { metadata: { finalizers: ["test.example/held"] } } })
          yield* api.delete(R.Pods, ns, name, { gracePeriodSeconds: 0 })
        })
      const ip = (p: { readonly ips: ReadonlyArray<{ readonly ips: ReadonlyArray<string> }> }) => p.ips[0]!.ips[0]!

      yield* setPhase(ns, "succeeded", "Succeeded")
      yield* setPhase(ns, "failed", "Failed")
      yield* hold("evicted")
      yield* patchPodStatus(ns, "evicted", { conditions: [{ type: "DisruptionTarget", status: "True", reason: "DeletionByTaintManager", message: "Taint manager: deleting due to NoExecute taint" }] })
      yield* hold("orphaned")
      yield* api.delete(R.Nodes, undefined, dead)
      yield* hold("stranded")
      const current = yield* api.get(R.Nodes, undefined, dying)
      yield* api.replace(R.Nodes, undefined, { ...nodeObject(dying, { ready: "Unknown", taints: [OUT_OF_SERVICE] }), metadata: { name: dying, resourceVersion: current.metadata.resourceVersion } })

      yield* waitForEqual("only the running pod keeps its address", poolView("10.226.0.0-24"), { [ip(running)]: `${ns}/running` })
      yield* waitForEqual("and its reservation", Effect.map(reservationView, (r) => Object.keys(r).filter((n) => n.startsWith("10.226."))), [ip(running)])
      for (const name of ["succeeded", "failed", "evicted", "orphaned", "stranded"]) {
        expect(Either.isRight(yield* Effect.either(api.get(R.Pods, ns, name))), `${name} still exists`).toBe(true)
      }
      yield* waitForEqual("one Event each, saying why", eventLines(ns, (e) => e.reason === GC), [
        `Normal ${GC} evicted: ${gcMessage(ip(evicted), "net")} (pod evicted by the taint manager)`,
        `Normal ${GC} failed: ${gcMessage(ip(failed), "net")} (pod Failed)`,
        `Normal ${GC} orphaned: ${gcMessage(ip(orphaned), "net")} (node gone)`,
        `Normal ${GC} stranded: ${gcMessage(ip(stranded), "net")} (node out of service)`,
        `Normal ${GC} succeeded: ${gcMessage(ip(succeeded), "net")} (pod Succeeded)`
      ])
      yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "terminal" }, (v) => v === 2)
      yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "evicted" }, (v) => v === 1)

      // A StatefulSet pod stranded on the dead node in a full /30: freed while its object remains;
      // the StatefulSet controller creates the replacement only once the object is gone, and it starts.
      yield* startPod(ns, "db-0", [on(`${ns}/small`)], alive)
      const db1 = yield* startPod(ns, "db-1", [on(`${ns}/small`)], dying)
      yield* hold("db-1")
      yield* waitForEqual("db-1's address freed", poolView("10.227.0.0-30"), { "10.227.0.1": `${ns}/db-0` })
      yield* api.patch(R.Pods, ns, "db-1", { type: "merge", body: { metadata: { finalizers: [] } } })
      yield* waitForEqual("the old db-1 gone", Effect.map(Effect.either(api.get(R.Pods, ns, "db-1")), Either.isLeft), true)
      const replacement = yield* startPod(ns, "db-1", [on(`${ns}/small`)], alive)
      expect(ip(replacement)).toBe(ip(db1))
      for (const name of ["evicted", "orphaned", "stranded"]) yield* api.patch(R.Pods, ns, name, { type: "merge", body: { metadata: { finalizers: [] } } })
    }).pipe(Effect.provide(liveWorld(POOLS))), 120_000)
})
