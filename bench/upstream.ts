/**
 * `npm run bench:upstream`: only the comparison with whereabouts' own pod controller
 * (bench/lib/upstream.ts) on a real kube-apiserver + etcd. Writes
 * bench/results/upstream.json and its tables in BENCHMARKS.md.
 *
 *   UPSTREAM_PODS=n    pods per run (default 100; upstream as released needs minutes per hundred)
 *   UPSTREAM_REPS=n    repetitions of the four runs (default 1)
 *   BENCH_SCALE=quick  20 pods, results not written (a smoke test)
 */
import * as os from "node:os"
import { startBench } from "./lib/env.ts"
import { makePhases } from "./lib/phases.ts"
import { machine } from "./lib/report.ts"
import { upstreamComparison } from "./lib/upstream.ts"

const quick = process.env["BENCH_SCALE"] === "quick"
const pods = Number(process.env["UPSTREAM_PODS"] ?? (quick ? 20 : 100))
const reps = Number(process.env["UPSTREAM_REPS"] ?? 1)
const { phase, log, finish } = makePhases("bench:upstream")

const { plane, etcd, logDir, run } = await startBench(log)

let result: Awaited<ReturnType<typeof upstreamComparison>>
try {
  phase(`upstream pod controller vs the controller: ${pods} pods / 10 pools on one node, ×${reps}`)
  result = await upstreamComparison(plane, logDir, run, { pods, pools: 10, reps, log })
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
