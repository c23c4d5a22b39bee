/**
 * `npm run bench`: what the real-API-server rows cannot show, with no API server at all: the heap
 * one cached pod costs, the controller's projection against the whole object the baseline keeps,
 * each measured in a child process of its own (bench/children/heap.ts). Writes
 * bench/results/memory.json and its tables in BENCHMARKS.md.
 *
 *   BENCH_SCALE=quick   a smoke test at small scale (results not written)
 */
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import { ROOT } from "./lib/paths.ts"
import { type Row, type Section, machine, table, yesNo } from "./lib/report.ts"
import { ratio } from "./lib/rows.ts"
import { fmt, ms, spread } from "./lib/stats.ts"
import { makePhases } from "./lib/phases.ts"

if (process.argv.includes("--help")) {
  process.stdout.write("npm run bench   the heap per cached pod (BENCH_SCALE=quick: a smoke test, nothing written); writes bench/results/memory.json and BENCHMARKS.md\n")
  process.exit(0)
}
const quick = process.env["BENCH_SCALE"] === "quick"
const S = quick ? { heapPods: 2_000 } : { heapPods: 10_000 }
const { phase, finish } = makePhases("bench")

const child = (args: ReadonlyArray<string>): Record<string, unknown> =>
  JSON.parse(execFileSync(process.execPath, args as Array<string>, { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 24 }).trim().split("\n").pop()!) as Record<string, unknown>

const rows: Array<Row> = []
const sections: Array<Section> = []
const data: Record<string, unknown> = {}

phase(`heap per cached pod: ${S.heapPods} realistic pods, child processes with --expose-gc`)
const heap = { projection: [] as Array<Record<string, unknown>>, full: [] as Array<Record<string, unknown>> }
for (let i = 0; i < 3; i++) {
  for (const mode of ["projection", "full"] as const) heap[mode].push(child(["--expose-gc", path.join(ROOT, "bench/children/heap.ts"), mode, String(S.heapPods)]))
}
data["heap"] = heap
const perPod = (m: "projection" | "full") => spread(heap[m].map((h) => Number(h["perPod"])))
rows.push({
  scenario: `heap per cached pod (${S.heapPods} realistic pods with Multus annotations)`,
  metric: "heap delta of the synced informer cache ÷ pods, median (min–max)",
  ours: `${fmt(perPod("projection").median)} B (${fmt(perPod("projection").min)}–${fmt(perPod("projection").max)})`,
  baseline: `${fmt(perPod("full").median)} B (${fmt(perPod("full").min)}–${fmt(perPod("full").max)})`,
  ratio: ratio(perPod("full").median, perPod("projection").median),
  target: "≤ 1.5 KB (baseline ~16 KB)",
  met: yesNo(perPod("projection").max <= 1536)
})
sections.push({
  title: "Heap per cached pod",
  body: `\`node --expose-gc bench/children/heap.ts <projection|full> ${S.heapPods}\`, one process per measurement, three each: the real informer (\`makeInformer\`) lists the pods from a stub API that decodes each pod from its JSON text (${fmt(Number(heap.full[0]?.["jsonBytes"]))} bytes: managedFields of four managers, labels, an ownerReference, two containers with probes and env, projected volumes, tolerations, status with five conditions and two container statuses, the Multus \`networks\` and \`network-status\` annotations). Heap used after four full GCs with the cache synced, minus the same before the informer started, divided by the pods cached. The projection is \`projectPod\` exactly as \`Caches\` uses it; the baseline keeps the decoded object.\n\n${table(
    ["cache", "run", "pods", "heap before", "heap after", "per pod", "list+sync time"],
    (["projection", "full"] as const).flatMap((m) => heap[m].map((h, i) => [m, i + 1, String(h["cached"]), `${fmt(Number(h["before"]) / 2 ** 20)} MiB`, `${fmt(Number(h["after"]) / 2 ** 20)} MiB`, `${fmt(Number(h["perPod"]))} B`, ms(Number(h["syncMs"]))]))
  )}`
})

finish({
  name: "memory",
  command: "npm run bench",
  quick,
  machine: machine(),
  conditions: (load) => `${load}: the machine is shared, so absolute times move between runs; the ratios between contenders measured in the same run move less.`,
  rows,
  sections,
  data
})
