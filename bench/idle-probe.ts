/**
 * Idle-CPU probe (bench:scale's quiet minute, taken apart): builds the scale world at $PODS pods,
 * starts the image's program with --trace-gc, waits for its start-up sweep and 10 s, then reads
 * $WINDOWS quiet windows of $IDLE seconds in a row: the controller's CPU and its per-thread ticks
 * (/proc/<pid>/task/<tid>/stat). The controller's log (with V8's GC trace) is in the printed logDir.
 *   PODS=150000 WINDOWS=3 node bench/idle-probe.ts
 * Lives on main for one commit: BENCHMARKS.md's Decisions row names it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { bundle } from "../scripts/build.ts"
import { cpuSeconds, runOver } from "./lib/controlplane.ts"
import { SHIPPED, startBench } from "./lib/env.ts"
import { imageNodeFlags } from "./lib/image.ts"
import { ROOT } from "./lib/paths.ts"
import { spawnContender, startupSwept } from "./lib/proc.ts"
import { buildWorld, scaleLayout } from "./lib/rssworld.ts"

const log = (s: string) => console.log(new Date().toISOString(), s)
const DIST = await bundle(path.join(ROOT, "bench/.build"))
const image = imageNodeFlags()
const { plane, logDir, driver } = await startBench(log)
log(`logDir ${logDir}`)
const run = runOver(driver)
const pods = Number(process.env.PODS ?? "0")
const windows = Number(process.env.WINDOWS ?? "3")
const idleS = Number(process.env.IDLE ?? "60")
try {
  if (pods > 0) await run(buildWorld(plane, scaleLayout(pods), undefined, (d, ms) => log(`${d} pods ${ms}`)))
  log("world built")
  const p = await spawnContender("ours", { kubeconfig: plane.kubeconfigPath, qps: SHIPPED.qps, burst: SHIPPED.burst, logDir, label: `idle`, env: { LOG_LEVEL: "info", ...image.env }, nodeArgs: [...image.flags, "--trace-gc"], script: DIST })
  await p.ready(900_000)
  log(`ready rss ${p.memory().rss}`)
  await startupSwept(p, 900_000, 100)
  log("swept")
  await sleep(10_000)
  const threads = () => Object.fromEntries(fs.readdirSync(`/proc/${p.pid}/task`).map((t) => { const st = fs.readFileSync(`/proc/${p.pid}/task/${t}/stat`, "utf8"); const name = /\((.*)\)/.exec(st)![1]; const f = st.slice(st.lastIndexOf(")") + 2).split(" "); return [`${t}:${name}`, Number(f[11]) + Number(f[12])] }))
  for (let w = 0; w < windows; w++) {
    const t0 = threads()
    const c0 = cpuSeconds(p.pid)
    log(`window ${w} begins`)
    await sleep(idleS * 1000)
    const c1 = cpuSeconds(p.pid)
    const t1 = threads()
    log(`window ${w}: ${JSON.stringify(Object.fromEntries(Object.entries(t1).map(([k, v]) => [k, v - (t0[k] ?? 0)]).filter(([, v]) => (v as number) > 0)))}`)
    log(`window ${w}: idle CPU ${((c1 - c0) * 1000 / idleS).toFixed(2)} millicores, rss ${(p.memory().rss / 1048576).toFixed(0)} MiB`)
  }
  await p.stop()
} finally {
  await plane.stop()
}
