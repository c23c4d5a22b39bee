/**
 * Lifecycles played by Kubernetes' own controllers: kube-controller-manager (StatefulSet,
 * ReplicaSet, Deployment, Job, pod GC, node lifecycle, taint eviction) and kube-scheduler next to the
 * tier's API server, node agents running the real whereabouts plugin that never run CNI DEL (the
 * leak), and the controller as a process: every address freed here is freed by the controller.
 * Each scenario ends with the invariants at rest, and a watch asserts throughout that no running
 * pod ever lost an address (support/address-watch.ts).
 */
import { afterAll, beforeAll, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, ManagedRuntime, type Scope } from "effect"
import { poolName } from "../../src/domain/pool.ts"
import { describeWithKubernetes, kubernetesAssets, pluginBinary, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { awaitClean, CLEAN, watchAddresses } from "./support/address-watch.ts"
import { type ControllerProcess, stopAllControllers } from "./support/controller-process.ts"
import { metricOf, sharedController } from "./support/controller.ts"
import {
  awaitReady,
  createWorkload,
  deleteWorkload,
  type Kubernetes,
  podsOf,
  podTemplate,
  scale,
  startKubernetes,
  statefulSetObject,
  TEST_TIMEOUT
} from "./support/kubernetes.ts"
import { createNad, ensureNamespace, liveWorld, restOk, waitUntil } from "./support/world.ts"

const POOLS = uniqueNamespace("lc-pools")
const NS = uniqueNamespace("lc")
/** The label the agents' Nodes carry and every workload here selects. */
const SELECT = { "lifecycle.whereabouts.test/run": NS }
const NODES = ["a", "b", "c"].map((n) => `${NS}-${n}`)

/** Addresses the controller freed, whatever found them (a deletion, a pod that ended, an eviction). */
const freedBy = (ctl: ControllerProcess) => Effect.map(metricOf(ctl, "whereabouts_controller_ips_freed_total"), (v) => v ?? 0)

class Cluster extends Context.Tag("test/live/lifecycle/Cluster")<Cluster, Kubernetes>() {}

describeWithKubernetes("lifecycles on Kubernetes' own controllers, with the controller as the only one that frees", () => {
  const controller = sharedController(() => ({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: POOLS, identity: `lc-${Date.now().toString(36)}` }))
  const world = Layer.suspend(() => liveWorld(POOLS))
  const cluster = Layer.scoped(
    Cluster,
    Effect.gen(function* () {
      yield* ensureNamespace(POOLS)
      yield* ensureNamespace(NS)
      const assets = kubernetesAssets()
      return yield* startKubernetes({
        controllers: assets.controllers(),
        planeDir: assets.planeDir,
        kubeconfig: runningEnvtest().kubeconfigPath,
        plugin: pluginBinary(),
        poolsNamespace: POOLS,
        nodes: NODES,
        teardown: "leak",
        nodeLabels: { ...SELECT, "topology.kubernetes.io/zone": NS }
      })
    })
  ).pipe(Layer.provideMerge(world))
  let runtime: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<typeof cluster>, unknown>
  const run = <A, E>(body: Effect.Effect<A, E, Layer.Layer.Success<typeof cluster> | Scope.Scope>) => runtime.runPromise(Effect.scoped(body))

  beforeAll(async () => {
    runtime = ManagedRuntime.make(cluster)
    await runtime.runPromise(Effect.zipRight(Cluster, controller.get))
  }, 180_000)
  afterAll(async () => {
    await stopAllControllers()
    await runtime?.dispose()
  }, 120_000)

  it("a StatefulSet with two interfaces per pod: force and graceful deletions (rebirth under the same name), scale down and up, deletion", () =>
    run(
      Effect.gen(function* () {
        const k8s = yield* Cluster
        const ctl = yield* controller.get
        const freedBefore = yield* freedBy(ctl)
        const nets = [
          { nad: "sts-a", range: "10.230.0.0/28" },
          { nad: "sts-b", range: "10.230.1.0/28" }
        ]
        for (const n of nets) yield* createNad(NS, n.nad, { range: n.range })
        const pools = nets.map((n) => poolName(n.range, ""))
        const watch = yield* watchAddresses(k8s, NS, pools)
        const template = podTemplate({ labels: { app: "db" }, networks: `${NS}/sts-a@net1,${NS}/sts-b@net2`, nodeSelector: SELECT })
        yield* createWorkload(k8s.admin, NS, statefulSetObject("db", 3, template))
        yield* awaitReady(k8s.admin, "StatefulSet", NS, "db", 3, k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)

        const podNamed = (name: string) => Effect.map(podsOf(k8s.admin, NS, "app=db"), (ps) => ps.find((p) => p.name === name))
        const uidOf = (name: string) => Effect.map(podNamed(name), (p) => p?.uid)
        const reborn = (name: string, old: string | undefined) =>
          Effect.gen(function* () {
            yield* waitUntil(`${name} reborn and running`, podNamed(name), (p) => p !== undefined && p.uid !== old && p.phase === "Running", { context: k8s.context })
            yield* awaitReady(k8s.admin, "StatefulSet", NS, "db", 3, k8s.context)
          })
        const force = yield* uidOf("db-1")
        yield* restOk(k8s.admin, "DELETE", `/api/v1/namespaces/${NS}/pods/db-1`, { gracePeriodSeconds: 0 }, [200])
        yield* reborn("db-1", force)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)

        const graceful = yield* uidOf("db-0")
        yield* restOk(k8s.admin, "DELETE", `/api/v1/namespaces/${NS}/pods/db-0`, undefined, [200])
        yield* reborn("db-0", graceful)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)

        yield* scale(k8s.admin, "StatefulSet", NS, "db", 1)
        yield* awaitReady(k8s.admin, "StatefulSet", NS, "db", 1, k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)
        yield* scale(k8s.admin, "StatefulSet", NS, "db", 3)
        yield* awaitReady(k8s.admin, "StatefulSet", NS, "db", 3, k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)

        yield* deleteWorkload(k8s.admin, "StatefulSet", NS, "db", "app=db", k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)
        expect(watch.rounds()).toBeGreaterThan(0)
        expect(watch.lost()).toEqual([])
        // The agents never ran DEL: the scale-down's two pods and the last three, two addresses each, were freed by the controller.
        expect((yield* freedBy(ctl)) - freedBefore).toBeGreaterThanOrEqual(10)
      })
    ), TEST_TIMEOUT)
})
