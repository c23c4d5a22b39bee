/**
 * Several checkouts of the controller on the in-memory mass deletion of `npm run bench` (its
 * first scenario: 5,000 pods over 10 pools, no client-side limit), each run in a fresh process
 * with the checkout's own bench code, checkouts alternating, to tell a commit's cost from the
 * machine's noise:
 *
 *   git worktree add /tmp/a <commit> && ln -s "$PWD/node_modules" /tmp/a/node_modules
 *   node bench/ab-memory.ts [--runs 3] [--pods 5000] /tmp/a /tmp/b …
 *
 * Prints last delete → every pool entry free per run and the median per checkout. Evidence for
 * BENCHMARKS.md prose; not part of `npm run bench`.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { takeNumber } from "./lib/args.ts"
import { spread } from "./lib/stats.ts"

const args = process.argv.slice(2)
const option = (name: string, fallback: number) => takeNumber(args, name, fallback)

if (args[0] === "--one") {
  // One run with the bench code of the checkout at args[1].
  const [, root, pods] = args
  const { Cause, Effect } = await import(`${root}/node_modules/effect/dist/esm/index.js`)
  const { KubeApi } = await import(`${root}/src/services/KubeApi.ts`)
  const { memoryEnv } = await import(`${root}/bench/lib/env.ts`)
  const { massDeletion } = await import(`${root}/bench/lib/scenarios.ts`)
  const { env, driver } = memoryEnv("1 millis")
  const r = await Effect.runPromise(
    Effect.scoped(massDeletion(env, "ours", { pods: Number(pods), pools: 10, limits: { qps: 0, burst: 30 }, label: "ab" })).pipe(
      Effect.provideService(KubeApi, driver),
      Effect.catchAllCause((cause: unknown) => Effect.die(new Error(Cause.pretty(cause))))
    )
  )
  process.stdout.write(`${JSON.stringify({ poolFreedMs: r.poolFreedMs })}\n`)
  process.exit(0)
}

const runs = option("--runs", 3)
const pods = option("--pods", 5_000)
if (args.length === 0) throw new Error("usage: node bench/ab-memory.ts [--runs n] [--pods n] <checkout> [<checkout> …]")
const self = fileURLToPath(import.meta.url)
const freed = new Map<string, Array<number>>(args.map((root) => [root, []]))
for (let i = 0; i < runs; i++) {
  for (const root of args) {
    const out = execFileSync(process.execPath, [self, "--one", root, String(pods)], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], maxBuffer: 64 * 2 ** 20 })
    const { poolFreedMs } = JSON.parse(out.trim().split("\n").at(-1)!) as { readonly poolFreedMs: number }
    freed.get(root)!.push(poolFreedMs)
    process.stdout.write(`${root} #${i + 1}: every pool entry free ${Math.round(poolFreedMs)} ms after the last delete\n`)
  }
}
for (const [root, ms] of freed) {
  const s = spread(ms)
  process.stdout.write(`${root}: median ${Math.round(s.median)} ms (${Math.round(s.min)}–${Math.round(s.max)})\n`)
}
