/**
 * `npm run bench:upstream`: only the comparison with whereabouts' own pod controller
 * (bench/lib/upstream.ts) on a real kube-apiserver + etcd, without the other scenarios of
 * `npm run bench:apiserver` (which runs the same comparison once among them). Writes
 * bench/results/upstream.json and its tables in BENCHMARKS.md.
 *
 *   UPSTREAM_PODS=n    pods per run (default 100; upstream as released needs minutes per hundred)
 *   UPSTREAM_REPS=n    repetitions of the four runs (default 1)
 *   BENCH_SCALE=quick  20 pods, results not written (a smoke test)
 */
import * as os from "node:os"
import { Cause, Effect, type Scope } from "effect"
import type { KubeApi } from "../src/services/KubeApi.ts"
import { etcdVersion, startBenchPlane } from "./lib/controlplane.ts"
import { apiserverEnv, type BenchEnv, SHIPPED, limitsAt } from "./lib/env.ts"
import { driverLayer } from "./lib/live.ts"
import { makePhases } from "./lib/phases.ts"
import { machine } from "./lib/results.ts"
import { upstreamComparison } from "./lib/upstream.ts"

const quick = process.env["BENCH_SCALE"] === "quick"
const pods = Number(process.env["UPSTREAM_PODS"] ?? (quick ? 20 : 100))
const reps = Number(process.env["UPSTREAM_REPS"] ?? 1)
const { phase, log, finish } = makePhases("bench:upstream")

log("starting etcd + kube-apiserver (scripts/envtest-assets.sh)")
const plane = await startBenchPlane()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
const etcd = etcdVersion(plane.assets)
const { env, logDir } = apiserverEnv(plane)
log(`kube-apiserver ${plane.version}, etcd ${etcd}; contender logs in ${logDir}`)
const driver = driverLayer(plane)
const run = <A>(f: (env: BenchEnv) => Effect.Effect<A, Error, KubeApi | Scope.Scope>): Promise<A> =>
  Effect.runPromise(Effect.scoped(f(env)).pipe(Effect.provide(driver), Effect.catchAllCause((cause) => Effect.die(new Error(Cause.pretty(cause))))))

let result: Awaited<ReturnType<typeof upstreamComparison>>
try {
  phase(`upstream pod controller vs the controller: ${pods} pods / 10 pools on one node, ×${reps}`)
  result = await upstreamComparison(plane, logDir, run, { pods, pools: 10, reps, defaults: SHIPPED, raised: limitsAt(500), log })
} finally {
  await plane.stop()
}
if (typeof result === "string") {
  log(`no upstream controller: ${result}`)
  process.exit(1)
}
finish({
  name: "upstream",
  command: [pods === 100 ? "" : `UPSTREAM_PODS=${pods}`, reps === 1 ? "" : `UPSTREAM_REPS=${reps}`, "npm run bench:upstream"].filter((x) => x !== "").join(" "),
  quick,
  machine: machine({ kubeApiserver: plane.version, etcd }),
  conditions: (load) =>
    `kube-apiserver ${plane.version} and etcd ${etcd} on loopback, started by test/live/cluster.ts from \`scripts/envtest-assets.sh\`; upstream: ${result.binary.version} (\`${result.binary.path}\`); the API server, etcd, the contender and the benchmark share the machine's ${os.cpus().length} CPUs. ${load}.`,
  rows: result.rows,
  sections: [result.section],
  data: { upstream: result.runs, binary: result.binary }
})
