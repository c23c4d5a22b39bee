/**
 * What a lifecycle file on real controllers shares between its tests (call inside its describe):
 * a pods namespace and a pools namespace of its own, Kubernetes' controllers and scheduler and a
 * few node agents (kubernetes.ts) built once before the tests and stopped after them, and the
 * controller as a process (started on first use; a test that needs other flags stops it and the
 * next `controller.get` starts a default one again).
 */
import { afterAll, beforeAll } from "@effect/vitest"
import { Context, Effect, Layer, ManagedRuntime, type Scope } from "effect"
import { kubernetesAssets, pluginBinary, runningEnvtest, uniqueNamespace } from "../../support/live.ts"
import { type ControllerProcess, stopAllControllers } from "./controller-process.ts"
import { metricOf, sharedController } from "./controller.ts"
import { type Kubernetes, startKubernetes } from "./kubernetes.ts"
import { ensureNamespace, liveWorld } from "./world.ts"

export class Cluster extends Context.Tag("test/live/Cluster")<Cluster, Kubernetes>() {}

/** Addresses the controller freed, whatever found them (a deletion, a pod that ended, an eviction). */
export const freedBy = (ctl: ControllerProcess) => Effect.map(metricOf(ctl, "whereabouts_controller_ips_freed_total"), (v) => v ?? 0)

export const lifecycleFixture = (prefix: string, nodes: number, teardown: "del" | "leak" = "leak") => {
  const POOLS = uniqueNamespace(`${prefix}-pools`)
  const NS = uniqueNamespace(prefix)
  /** The label the agents' Nodes carry and every workload of the file selects. */
  const SELECT = { "lifecycle.whereabouts.test/run": NS }
  const NODES = Array.from({ length: nodes }, (_, i) => `${NS}-${String.fromCharCode(97 + i)}`)
  const controller = sharedController(() => ({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: POOLS, identity: `${prefix}-${Date.now().toString(36)}` }))
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
        teardown,
        // A zone of their own: other files' Nodes do not count in this zone's health.
        nodeLabels: { ...SELECT, "topology.kubernetes.io/zone": NS }
      })
    })
  ).pipe(Layer.provideMerge(world))
  type Env = Layer.Layer.Success<typeof cluster>
  let runtime: ManagedRuntime.ManagedRuntime<Env, unknown> | undefined

  beforeAll(async () => {
    runtime = ManagedRuntime.make(cluster)
    await runtime.runPromise(Effect.zipRight(Cluster, controller.get))
  }, 180_000)
  afterAll(async () => {
    await stopAllControllers()
    await runtime?.dispose()
  }, 120_000)

  const run = <A, E>(body: Effect.Effect<A, E, Env | Scope.Scope>): Promise<A> => {
    if (runtime === undefined) throw new Error("the lifecycle fixture did not start")
    return runtime.runPromise(Effect.scoped(body))
  }
  return { NS, POOLS, SELECT, NODES, controller, run }
}
