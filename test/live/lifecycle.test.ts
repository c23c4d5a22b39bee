/**
 * Workload lifecycles played by Kubernetes' own controllers: kube-controller-manager (StatefulSet,
 * ReplicaSet, Deployment, Job, garbage collector) and kube-scheduler next to the tier's API server,
 * node agents running the real whereabouts plugin that never run CNI DEL (the leak), and the
 * controller as a process: every address freed here is freed by the controller. Each scenario ends
 * with the invariants at rest, and a watch asserts throughout that no running pod ever lost an
 * address (support/address-watch.ts). Node deaths are in node-loss.test.ts.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { poolName } from "../../src/domain/pool.ts"
import { describeWithKubernetes } from "../support/live.ts"
import { awaitClean, CLEAN, watchAddresses } from "./support/address-watch.ts"
import {
  awaitReady,
  createWorkload,
  deleteWorkload,
  deploymentObject,
  jobObject,
  patchWorkload,
  podsOf,
  podTemplate,
  readWorkload,
  scale,
  statefulSetObject,
  TEST_TIMEOUT
} from "./support/kubernetes.ts"
import { Cluster, freedBy, lifecycleFixture } from "./support/lifecycle-fixture.ts"
import { createNad, eventLines, gcMessage, restOk, waitForEqual, waitUntil } from "./support/world.ts"

describeWithKubernetes("workload lifecycles on Kubernetes' own controllers, with the controller as the only one that frees", () => {
  const { NS, SELECT, controller, run } = lifecycleFixture("lc", 3)

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
        const reborn = (name: string, query: string) =>
          Effect.gen(function* () {
            const old = (yield* podNamed(name))?.uid
            yield* restOk(k8s.admin, "DELETE", `/api/v1/namespaces/${NS}/pods/${name}${query}`, undefined, [200])
            yield* waitUntil(`${name} reborn and running`, podNamed(name), (p) => p !== undefined && p.uid !== old && p.phase === "Running", { context: k8s.context })
            yield* awaitReady(k8s.admin, "StatefulSet", NS, "db", 3, k8s.context)
            expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)
          })
        yield* reborn("db-1", "?gracePeriodSeconds=0")
        yield* reborn("db-0", "")

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
        yield* waitUntil("the controller freed at least 10 addresses", freedBy(ctl), (n) => n - freedBefore >= 10, { context: ctl.tail })
      })
    ), TEST_TIMEOUT)

  it("a Deployment: a rollout replaces every pod, then a scale-down and the deletion", () =>
    run(
      Effect.gen(function* () {
        const k8s = yield* Cluster
        const ctl = yield* controller.get
        const freedBefore = yield* freedBy(ctl)
        yield* createNad(NS, "web", { range: "10.164.0.0/27" })
        const pools = [poolName("10.164.0.0/27", "")]
        const watch = yield* watchAddresses(k8s, NS, pools)
        yield* createWorkload(k8s.admin, NS, deploymentObject("web", 4, podTemplate({ labels: { app: "web" }, networks: `${NS}/web`, nodeSelector: SELECT })))
        yield* awaitReady(k8s.admin, "Deployment", NS, "web", 4, k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)

        const first = yield* podsOf(k8s.admin, NS, "app=web")
        yield* patchWorkload(k8s.admin, "Deployment", NS, "web", { spec: { template: { metadata: { annotations: { "lifecycle.whereabouts.test/rollout": "2" } } } } })
        yield* waitUntil(
          "the rollout replaced every pod",
          podsOf(k8s.admin, NS, "app=web"),
          (ps) => ps.length === 4 && ps.every((p) => p.phase === "Running" && !p.terminating && !first.some((f) => f.uid === p.uid)),
          { context: k8s.context, timeout: "90 seconds" }
        )
        yield* awaitReady(k8s.admin, "Deployment", NS, "web", 4, k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)

        yield* scale(k8s.admin, "Deployment", NS, "web", 1)
        yield* awaitReady(k8s.admin, "Deployment", NS, "web", 1, k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)
        yield* deleteWorkload(k8s.admin, "Deployment", NS, "web", "app=web", k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)
        expect(watch.lost()).toEqual([])
        // Four replaced, three scaled away, the last one deleted.
        yield* waitUntil("the controller freed at least 8 addresses", freedBy(ctl), (n) => n - freedBefore >= 8, { context: ctl.tail })
      })
    ), TEST_TIMEOUT)

  it("Jobs: completed and failed pods keep their objects and give up their addresses", () =>
    run(
      Effect.gen(function* () {
        const k8s = yield* Cluster
        const ctl = yield* controller.get
        const freedBefore = yield* freedBy(ctl)
        yield* createNad(NS, "batch", { range: "10.165.0.0/28" })
        const pools = [poolName("10.165.0.0/28", "")]
        const watch = yield* watchAddresses(k8s, NS, pools)
        const template = (job: string, exitCode: number) => podTemplate({ labels: { job }, networks: `${NS}/batch`, nodeSelector: SELECT, exitCode, runsForSeconds: 2 })
        yield* createWorkload(k8s.admin, NS, jobObject("ok", template("ok", 0), { completions: 2 }))
        yield* createWorkload(k8s.admin, NS, jobObject("bad", template("bad", 1), { backoffLimit: 0 }))
        const condition = (name: string, type: string) =>
          Effect.map(readWorkload(k8s.admin, "Job", NS, name), (o) => ((o["status"] as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? []).some((c) => c.type === type && c.status === "True"))
        yield* waitUntil("Job ok Complete", condition("ok", "Complete"), (done) => done, { context: k8s.context, timeout: "60 seconds" })
        yield* waitUntil("Job bad Failed", condition("bad", "Failed"), (done) => done, { context: k8s.context, timeout: "60 seconds" })

        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)
        const phases = (selector: string) => Effect.map(podsOf(k8s.admin, NS, selector), (ps) => ps.map((p) => `${p.phase}${p.terminating ? " terminating" : ""} ${p.ips.length} address(es) listed`))
        expect(yield* phases("job=ok")).toEqual(["Succeeded 1 address(es) listed", "Succeeded 1 address(es) listed"])
        expect(yield* phases("job=bad")).toEqual(["Failed 1 address(es) listed"])
        const finished = yield* podsOf(k8s.admin, NS, "job in (ok, bad)")
        yield* waitForEqual(
          "one Event per finished pod, saying why",
          eventLines(NS, (e) => e.reason === "IPAddressGarbageCollected" && finished.some((p) => p.name === e.name)),
          finished.map((p) => `Normal IPAddressGarbageCollected ${p.name}: ${gcMessage(p.ips[0]!, "batch")} (pod ${p.phase})`).sort(),
          { context: k8s.context }
        )
        yield* waitUntil("the controller freed the three addresses", freedBy(ctl), (n) => n - freedBefore === 3, { context: ctl.tail })

        yield* deleteWorkload(k8s.admin, "Job", NS, "ok", "job=ok", k8s.context)
        yield* deleteWorkload(k8s.admin, "Job", NS, "bad", "job=bad", k8s.context)
        expect(yield* awaitClean(k8s, NS, pools)).toEqual(CLEAN)
        expect(watch.lost()).toEqual([])
      })
    ), TEST_TIMEOUT)
})
