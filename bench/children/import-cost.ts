/**
 * What loading a module costs a fresh process, for the RSS miss in BENCHMARKS.md:
 *
 *   node --expose-gc bench/children/import-cost.ts <module[,module…]> [slim]
 *
 * RSS and V8 heap used after two full GCs, before and after the imports (modules by package name,
 * or ./paths from the repository root). "slim" first registers the entry point's hook
 * (src/services/live/slim-client-node.ts), as the deployed process does.
 */
import { slimClientNode } from "../../src/services/live/slim-client-node.ts"

const targets = (process.argv[2] ?? "").split(",").filter((t) => t !== "")
if (process.argv[3] === "slim") slimClientNode()
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with --expose-gc")
const measure = () => {
  gc()
  gc()
  const m = process.memoryUsage()
  return { rss: m.rss, heapUsed: m.heapUsed }
}
const before = measure()
for (const t of targets) await import(t.startsWith(".") ? new URL(t, new URL("../../", import.meta.url)).href : t)
const after = measure()
process.stdout.write(`${JSON.stringify({ modules: targets, slim: process.argv[3] === "slim", rssBefore: before.rss, rssAfter: after.rss, heapBefore: before.heapUsed, heapAfter: after.heapUsed })}\n`)
