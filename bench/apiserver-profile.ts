/**
 * Where kube-apiserver spends its CPU while the controller frees a mass deletion: the headline
 * scenario of `npm run bench:apiserver` (PROFILE_PODS, 5,000, pods × 2 interfaces over 10 pools,
 * shipped defaults), with a Go CPU profile of the API server (its /debug/pprof/profile, on by
 * default) taken from the first delete for PROFILE_SECONDS (60). `single` profiles its single
 * deletions at 50/s instead (PROFILE_PODS, 1,000, one interface each, over 10 pools). Prints the run's figures, then
 * `go tool pprof -top` by cumulative time; the profile stays in the printed file for more views
 * (`go tool pprof -http` and so on). Evidence for BENCHMARKS.md prose; not a benchmark command.
 *
 *   node bench/apiserver-profile.ts [mass|single]
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { pprofTo, startBenchPlane } from "./lib/controlplane.ts"
import { apiserverEnv, SHIPPED } from "./lib/env.ts"
import { driverLayer, runOver } from "./lib/live.ts"
import { massDeletion, singleDeletions } from "./lib/scenarios.ts"

const scenario = process.argv[2] ?? "mass"
if (scenario !== "mass" && scenario !== "single") throw new Error("usage: node bench/apiserver-profile.ts [mass|single]")
const pods = Number(process.env["PROFILE_PODS"] ?? (scenario === "mass" ? 5_000 : 1_000))
const seconds = Number(process.env["PROFILE_SECONDS"] ?? 60)
const out = fs.mkdtempSync(path.join(os.tmpdir(), "apiserver-profile-"))
const profile = path.join(out, "kube-apiserver.pprof")
const log = (line: string) => process.stderr.write(`[apiserver-profile] ${line}\n`)

const plane = await startBenchPlane()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
try {
  let capture: Promise<void> | undefined
  const startProfile = Effect.sync(() => {
    log(`profiling kube-apiserver for ${seconds} s from the first delete`)
    capture = pprofTo(plane, `profile?seconds=${seconds}`, profile, (seconds + 30) * 1000)
  })
  const { env } = apiserverEnv(plane)
  const measured = runOver(driverLayer(plane))
  process.stdout.write(
    await measured(
      scenario === "mass"
        ? Effect.map(
            massDeletion(env, "ours", { pods, pools: 10, perPod: 2, limits: SHIPPED, label: "profile", beforeDeletes: startProfile }),
            (r) =>
              `${pods} pods × 2: deletes ${(r.deleteWindowMs / 1000).toFixed(1)} s, all free ${(Math.max(r.poolFreedMs, r.reservationsFreedMs) / 1000).toFixed(2)} s, Events ${(r.reconciledMs / 1000).toFixed(2)} s after the last delete; CPU s ${JSON.stringify(r.cpu)}\ncalls ${JSON.stringify(r.calls)}\n`
          )
        : Effect.map(
            singleDeletions(env, "ours", { pods, pools: 10, rate: 50, limits: SHIPPED, label: "profile", beforeDeletes: startProfile }),
            (r) => `${pods} pods at 50/s: pool entry p50 ${Math.round(r.pool.p50)} ms, p99 ${Math.round(r.pool.p99)} ms; CPU s ${JSON.stringify(r.cpu)}\ncalls ${JSON.stringify(r.calls)}\n`
          )
    )
  )
  if (capture === undefined) throw new Error("the profile was not taken")
  await capture
  const binary = path.join(plane.assets, "kube-apiserver")
  process.stdout.write(`profile: ${profile} (binary ${binary})\n`)
  process.stdout.write(execFileSync("go", ["tool", "pprof", "-top", "-cum", "-nodecount=60", binary, profile], { encoding: "utf8", maxBuffer: 64 << 20 }))
} finally {
  await plane.stop()
}
process.exit(0)
