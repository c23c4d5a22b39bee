/**
 * Two versions of the controller on one real API server, alternating, to tell a change from the
 * machine's noise (the box is shared; one run's absolute times move by 2x):
 *
 *   git worktree add /tmp/before <commit> && ln -s "$PWD/node_modules" /tmp/before/node_modules
 *   node bench/ab-mass.ts /tmp/before/src/programs/main.ts [pods] [runs]
 *
 * Runs the mass-deletion scenario of `npm run bench:apiserver` (`pods` pods over 10 pools, QPS
 * 500/burst 1000; default 1000 pods, 3 runs each) with this checkout's controller ("this") and
 * the other program ("other"), and prints last delete → every pool entry free per run and the
 * medians. Evidence for BENCHMARKS.md prose; not part of `npm run bench:apiserver`.
 */
import { Cause, Effect, type Scope } from "effect"
import type { KubeApi } from "../src/services/KubeApi.ts"
import { startBenchPlane } from "./lib/controlplane.ts"
import { apiserverEnv, type BenchEnv } from "./lib/env.ts"
import { driverLayer } from "./lib/live.ts"
import { type MassRun, massDeletion } from "./lib/scenarios.ts"
import { spread } from "./lib/stats.ts"

const [other, podsArg, runsArg] = process.argv.slice(2)
if (other === undefined) throw new Error("usage: node bench/ab-mass.ts <other main.ts or main.js> [pods] [runs]")
const pods = Number(podsArg ?? 1_000)
const runs = Number(runsArg ?? 3)
const plane = await startBenchPlane()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
try {
  const contenders = { this: apiserverEnv(plane).env, other: apiserverEnv(plane, { oursScript: other }).env }
  const driver = driverLayer(plane)
  const run = (env: BenchEnv, label: string): Promise<MassRun> =>
    Effect.runPromise(
      Effect.scoped(massDeletion(env, "ours", { pods, pools: 10, limits: { qps: 500, burst: 1_000 }, label })).pipe(
        Effect.provide(driver),
        Effect.catchAllCause((c: Cause.Cause<Error>) => Effect.die(new Error(Cause.pretty(c))))
      ) as Effect.Effect<MassRun, never, never>
    )
  const freed: Record<keyof typeof contenders, Array<number>> = { this: [], other: [] }
  for (let i = 0; i < runs; i++) {
    for (const name of ["this", "other"] as const) {
      const r = await run(contenders[name], `ab-${name}-${i}`)
      freed[name].push(r.poolFreedMs)
      process.stdout.write(`${name} #${i + 1}: deletes ${(r.deleteWindowMs / 1000).toFixed(1)} s, then every pool entry free after ${(r.poolFreedMs / 1000).toFixed(2)} s\n`)
    }
  }
  for (const name of ["this", "other"] as const) {
    const s = spread(freed[name])
    process.stdout.write(`${name}: median ${(s.median / 1000).toFixed(2)} s (${(s.min / 1000).toFixed(2)}-${(s.max / 1000).toFixed(2)})\n`)
  }
} finally {
  await plane.stop()
}
process.exit(0)
