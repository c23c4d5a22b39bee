/**
 * Nodes lost under a Deployment that fills a /30 (two addresses, two replicas, one per node), played
 * by Kubernetes' own controllers: the node lifecycle controller notices the silent node, the
 * taint-eviction controller evicts, pod GC force-deletes, the ReplicaSet controller replaces, the
 * scheduler places the replacement on the third node — which can only run once the controller has
 * freed the lost pod's address. The node agents never run CNI DEL, so every free is the
 * controller's. Each scenario ends with the node back (it finishes what was deleted meanwhile,
 * without DEL) and the invariants at rest; a watch asserts that no running pod lost an address.
 */
import { expect, it } from "@effect/vitest"
import { type Duration, Effect, type Scope } from "effect"
import { poolName } from "../../src/domain/pool.ts"
import type { ControllerConfig } from "../../src/services/ControllerConfig.ts"
import type { KubeApi } from "../../src/services/KubeApi.ts"
import { describeWithKubernetes, runningEnvtest } from "../support/live.ts"
import { type AddressWatch, awaitClean, CLEAN, watchAddresses } from "./support/address-watch.ts"
import { awaitLeading, launch } from "./support/controller.ts"
import {
  awaitReady,
  createWorkload,
  deleteWorkload,
  deploymentObject,
  type Kubernetes,
  nodeReady,
  type PodSeen,
  podsOf,
  podTemplate,
  TEST_TIMEOUT,
  taintNode,
  untaintNode
} from "./support/kubernetes.ts"
import { Cluster, lifecycleFixture } from "./support/lifecycle-fixture.ts"
import { createNad, eventLines, gcMessage, poolView, restOk, waitForEqual, waitUntil } from "./support/world.ts"

const OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"

describeWithKubernetes("nodes lost under a full /30, on Kubernetes' own controllers, with the controller as the only one that frees", () => {
  const { NS, POOLS, SELECT, controller, run } = lifecycleFixture("nl", 3)

  interface Filled {
    readonly k8s: Kubernetes
    readonly app: string
    readonly pool: string
    readonly watch: AddressWatch
    /** The pod on the node that is lost, as it was before. */
    readonly lost: PodSeen
  }

  /**
   * A NAD on `range` (a /30) and a Deployment `app` of two replicas on two nodes that fills it; then
   * the node of one of them dies (its agent stops: no heartbeat, no Lease, nothing done). The
   * controller must be running.
   */
  const fillThenLoseANode = (app: string, range: string, tolerateUnreachable: number | "forever"): Effect.Effect<Filled, unknown, Cluster | KubeApi | ControllerConfig | Scope.Scope> =>
    Effect.gen(function* () {
      const k8s = yield* Cluster
      yield* createNad(NS, app, { range })
      const pool = poolName(range, "")
      const watch = yield* watchAddresses(k8s, NS, [pool])
      const template = podTemplate({ labels: { app }, networks: `${NS}/${app}`, nodeSelector: SELECT, onePerNode: true, tolerateUnreachable })
      yield* createWorkload(k8s.admin, NS, deploymentObject(app, 2, template))
      yield* awaitReady(k8s.admin, "Deployment", NS, app, 2, k8s.context)
      expect(yield* awaitClean(k8s, NS, [pool])).toEqual(CLEAN)
      const lost = (yield* podsOf(k8s.admin, NS, `app=${app}`))[0]!
      expect(lost.ips).toHaveLength(1)
      yield* k8s.agent(lost.node).die
      return { k8s, app, pool, watch, lost }
    })

  /** The replacement runs on a live node, on the address the lost pod had. */
  const replaced = (f: Filled, timeout: Duration.DurationInput = "90 seconds") =>
    Effect.gen(function* () {
      const running = yield* waitUntil(
        "two pods of the Deployment run on live nodes",
        podsOf(f.k8s.admin, NS, `app=${f.app}`),
        (ps) => ps.filter((p) => p.phase === "Running" && !p.terminating && p.node !== f.lost.node && p.ips.length === 1).length === 2,
        { context: f.k8s.context, timeout }
      )
      expect(running.some((p) => p.ips[0] === f.lost.ips[0] && p.uid !== f.lost.uid)).toBe(true)
      const holder = (yield* poolView(f.pool))[f.lost.ips[0]!]
      expect(holder).not.toBe(`${NS}/${f.lost.name}`)
      yield* awaitReady(f.k8s.admin, "Deployment", NS, f.app, 2, f.k8s.context)
    })

  /** The node comes back, finishes what was deleted meanwhile (no DEL), and everything is at rest; then the Deployment goes. */
  const backToRest = (f: Filled) =>
    Effect.gen(function* () {
      yield* f.k8s.agent(f.lost.node).revive
      yield* waitUntil("the lost pod gone", podsOf(f.k8s.admin, NS, `app=${f.app}`), (ps) => !ps.some((p) => p.uid === f.lost.uid), { context: f.k8s.context })
      expect(yield* awaitClean(f.k8s, NS, [f.pool])).toEqual(CLEAN)
      yield* deleteWorkload(f.k8s.admin, "Deployment", NS, f.app, `app=${f.app}`, f.k8s.context)
      expect(yield* awaitClean(f.k8s, NS, [f.pool])).toEqual(CLEAN)
      expect(f.watch.rounds()).toBeGreaterThan(0)
      expect(f.watch.lost()).toEqual([])
    })

  const unknown = (f: Filled) =>
    waitUntil(`Node ${f.lost.node} Unknown`, nodeReady(f.k8s.admin, f.lost.node), (s) => s === "Unknown", { context: f.k8s.context, timeout: "60 seconds" })

  it("taint eviction: the old pod stays Terminating, the replacement on a live node gets its address and runs; the node comes back and finishes the old pod", () =>
    run(
      Effect.gen(function* () {
        yield* controller.get
        const f = yield* fillThenLoseANode("evicted", "10.232.0.0/30", 2)
        yield* waitUntil(
          "the taint manager evicted the lost pod",
          podsOf(f.k8s.admin, NS, `app=${f.app}`),
          (ps) => ps.some((p) => p.uid === f.lost.uid && p.terminating && p.disruption === "DeletionByTaintManager"),
          { context: f.k8s.context, timeout: "60 seconds" }
        )
        yield* replaced(f)
        const old = (yield* podsOf(f.k8s.admin, NS, `app=${f.app}`)).find((p) => p.uid === f.lost.uid)
        expect(old === undefined ? "gone" : `${old.phase}${old.terminating ? " terminating" : ""}`).toBe("Running terminating")
        yield* waitForEqual(
          "the Event says why",
          eventLines(NS, (e) => e.reason === "IPAddressGarbageCollected" && e.uid === f.lost.uid),
          [`Normal IPAddressGarbageCollected ${f.lost.name}: ${gcMessage(f.lost.ips[0]!, f.app)} (pod evicted by the taint manager)`],
          { context: f.k8s.context }
        )
        yield* backToRest(f)
      })
    ), TEST_TIMEOUT)

  it("the out-of-service taint on a dead node: pod GC force-deletes its pod, the replacement gets the address", () =>
    run(
      Effect.gen(function* () {
        yield* controller.get
        const f = yield* fillThenLoseANode("shutdown", "10.232.1.0/30", "forever")
        yield* unknown(f)
        yield* taintNode(f.k8s.admin, f.lost.node, { key: OUT_OF_SERVICE, value: "nodeshutdown", effect: "NoExecute" })
        yield* waitUntil("the lost pod deleted", podsOf(f.k8s.admin, NS, `app=${f.app}`), (ps) => !ps.some((p) => p.uid === f.lost.uid), { context: f.k8s.context, timeout: "90 seconds" })
        yield* replaced(f)
        yield* untaintNode(f.k8s.admin, f.lost.node, OUT_OF_SERVICE)
        yield* backToRest(f)
      })
    ), TEST_TIMEOUT)

  it("a Node deleted: pod GC deletes its pod after its quarantine, the replacement gets the address; the kubelet registers the Node again", () =>
    run(
      Effect.gen(function* () {
        yield* controller.get
        const f = yield* fillThenLoseANode("orphaned", "10.232.2.0/30", "forever")
        yield* restOk(f.k8s.admin, "DELETE", `/api/v1/nodes/${f.lost.node}`, undefined, [200])
        // Pod GC waits 40 s for a Node to come back and looks every 20 s.
        yield* waitUntil("the lost pod deleted", podsOf(f.k8s.admin, NS, `app=${f.app}`), (ps) => !ps.some((p) => p.uid === f.lost.uid), { context: f.k8s.context, timeout: "120 seconds" })
        yield* replaced(f)
        yield* backToRest(f)
        yield* waitUntil(`Node ${f.lost.node} registered and Ready`, nodeReady(f.k8s.admin, f.lost.node), (s) => s === "True", { context: f.k8s.context })
      })
    ), TEST_TIMEOUT)

  it("the NotReady opt-in: a pod deleted on an unreachable node that tolerates it stays Terminating; its address is freed once the node has been NotReady long enough", () =>
    run(
      Effect.gen(function* () {
        const k8s = yield* Cluster
        const shared = controller.current()
        if (shared !== undefined) yield* Effect.promise(() => shared.stop())
        const optIn = yield* launch({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: POOLS, args: ["--free-on-notready-after", "5s", "--terminating-grace", "1s"] })
        // The next test's controller.get starts a controller with the defaults again.
        yield* Effect.addFinalizer(() => Effect.promise(() => optIn.stop()))
        yield* awaitLeading(optIn)
        const f = yield* fillThenLoseANode("stranded", "10.232.3.0/30", "forever")
        yield* unknown(f)
        yield* restOk(k8s.admin, "DELETE", `/api/v1/namespaces/${NS}/pods/${f.lost.name}`, undefined, [200])
        yield* replaced(f)
        const old = (yield* podsOf(k8s.admin, NS, `app=${f.app}`)).find((p) => p.uid === f.lost.uid)
        expect(old === undefined ? "gone" : `${old.phase}${old.terminating ? " terminating" : ""}`).toBe("Running terminating")
        yield* backToRest(f)
      })
    ), TEST_TIMEOUT)
})
