/**
 * Upstream whereabouts' own e2e suite (v0.9.2, scripts/whereabouts-e2e.sh) against a cluster of
 * this harness: etcd and kube-apiserver, kube-controller-manager and kube-scheduler, two node agents
 * playing kubelet + Multus with the real plugin (the suite's NUMBER_OF_COMPUTE_NODES), and the
 * controller as a process under deploy/'s RBAC, in kube-system where the suite keeps its pools.
 *
 * - "leak": the agents never run CNI DEL, so the controller is the only thing that frees: every spec
 *   that checks an allocation is gone after a deletion checks the controller.
 * - "del": the agents run DEL as a kubelet does, the way upstream runs its suite (with its own
 *   cleanup controller, here ours): proves the harness plays a cluster the suite accepts.
 *
 * The suite owns namespace `default` and pools in `kube-system`, and sizes its ReplicaSet from every
 * pod of the cluster, so each mode gets a cluster of its own rather than the tier's shared one.
 * Specs that fail for a reason outside the controller are skipped with that reason
 * (upstream-e2e-skips.ts).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { describeWithKubernetes, kubernetesAssets, pluginBinary } from "../support/live.ts"
import { DIR_PREFIX, installCrds, startControlPlane } from "./cluster.ts"
import { stopAllControllers } from "./support/controller-process.ts"
import { awaitLeading, launch } from "./support/controller.ts"
import { startKubernetes } from "./support/kubernetes.ts"
import { credentialsOf } from "./support/rest.ts"
import { applyObjects, installation, serviceAccountToken, shippedRbac, writeTokenKubeconfig } from "./support/rbac.ts"
import { liveWorld } from "./support/world.ts"
import { type E2eMode, skippedIn } from "./upstream-e2e-skips.ts"
import { RACE_RERUNS, runUpstreamSuite } from "./support/upstream-e2e.ts"

const POOLS = "kube-system"
/** The suite's specs (its dry run lists them). */
const SPECS = 19
/**
 * Caps on the binary's runs: on this cluster a pod runs within a second of its creation, so the
 * suite's own 10-minute waits for a StatefulSet only run out when something is wrong.
 */
const MINUTES = { batch: 10, spec: 2 }
/** The specs of StatefulSets run one by one: at most this many binary runs of `spec` minutes after the batch, and RACE_RERUNS reruns. */
const STATEFUL_SPECS = 10

/** A cluster of its own with everything the suite needs, and the controller under deploy/'s RBAC; stopped with the scope. */
const suiteCluster = (mode: E2eMode) =>
  Effect.gen(function* () {
    const assets = kubernetesAssets()
    const plane = yield* Effect.acquireRelease(
      Effect.promise(() => startControlPlane(fs.mkdtempSync(path.join(os.tmpdir(), `${DIR_PREFIX}upstream-e2e-`)), assets.envtest)),
      (p) => Effect.promise(() => p.stop())
    )
    yield* Effect.promise(() => installCrds(plane))
    const inCluster = Effect.gen(function* () {
      const k8s = yield* startKubernetes({
        controllers: assets.controllers(),
        planeDir: plane.dir,
        kubeconfig: plane.kubeconfigPath,
        plugin: pluginBinary(),
        poolsNamespace: POOLS,
        nodes: ["worker-1", "worker-2"],
        teardown: mode
      })
      const admin = credentialsOf(plane.kubeconfigPath)
      const rbac = installation(shippedRbac(), { namespace: POOLS })
      yield* applyObjects(admin, rbac.objects)
      const token = yield* serviceAccountToken(admin, rbac.saNamespace, rbac.serviceAccount)
      const kubeconfig = writeTokenKubeconfig(path.join(plane.dir, "controller.kubeconfig"), admin, rbac.serviceAccount, token)
      const logFile = path.join(os.tmpdir(), `whereabouts-upstream-e2e-${mode}-controller.log`)
      fs.writeFileSync(logFile, "")
      const ctl = yield* launch({ kubeconfig, namespace: POOLS, identity: `upstream-e2e-${mode}`, logFile })
      yield* Effect.addFinalizer(() => Effect.promise(() => ctl.stop()))
      yield* awaitLeading(ctl)
      return { plane, k8s, ctl }
    })
    // Built in this scope, not just for inCluster: the agents' informers keep using it after it returns.
    const world = yield* Layer.build(liveWorld(POOLS, plane.kubeconfigPath))
    return yield* Effect.provide(inCluster, world)
  })

describeWithKubernetes(
  "upstream whereabouts' e2e suite (v0.9.2) on this harness's cluster",
  () => {
    it.each(["leak", "del"] as const)(
      "passes with node agents in the %s mode and the controller under deploy/'s RBAC",
      (mode) =>
        Effect.runPromise(
          Effect.scoped(
            Effect.gen(function* () {
              const { plane, k8s, ctl } = yield* suiteCluster(mode)
              // Outside the cluster's dir, which goes with the cluster: the whole output stays for a look after a failure.
              const logFile = path.join(os.tmpdir(), `whereabouts-upstream-e2e-${mode}.log`)
              const skip = skippedIn(mode)
              const report = yield* runUpstreamSuite({ binary: kubernetesAssets().upstreamE2e(), kubeconfig: plane.kubeconfigPath, admin: credentialsOf(plane.kubeconfigPath), skip, logFile, minutes: MINUTES })
              fs.writeFileSync(`${logFile}.agents`, k8s.agents.map((a) => `--- ${a.name}\n${a.history(100_000)}`).join("\n"))
              const tail = fs.readFileSync(logFile, "utf8").split("\n").slice(-60).join("\n")
              const context = `--- the suite's last lines (${logFile})\n${tail}\n--- controller\n${ctl.tail(30)}\n${k8s.context()}`
              process.stderr.write(
                `upstream e2e (${mode}): ran ${report.ran}, passed ${report.passed}, failed ${report.failed.length}, run again after one of the suite's own races: ${report.reruns.length === 0 ? "none" : report.reruns.join("; ")}, in ${report.seconds} s (${logFile})\n`
              )
              expect({ failed: report.failed, broken: report.broken }, context).toEqual({ failed: [], broken: [] })
              expect({ ran: report.ran, passed: report.passed }, context).toEqual({ ran: SPECS - skip.length, passed: SPECS - skip.length })
            }).pipe(Effect.ensuring(Effect.promise(() => stopAllControllers())))
          )
        ),
      (MINUTES.batch + (STATEFUL_SPECS + RACE_RERUNS) * MINUTES.spec + 3) * 60_000
    )
  },
  { upstreamE2e: true }
)
